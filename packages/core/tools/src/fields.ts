/**
 * Unknown fields in tool input. zod's `z.object` strips keys it does not know, so a model that
 * sends `terminal_send {…, wait: true}` would believe `wait` did something. The registry derives,
 * from each tool's input JSON Schema (JSON Schema 2020-12, `properties` and
 * `additionalProperties`), which object levels are closed, and rejects input that carries a key
 * none of their properties names.
 *
 * An object level is closed when its schema has `properties` and `additionalProperties` is
 * absent (`z.object`) or `false` (`z.strictObject`). A level with `additionalProperties` set to a
 * schema (`z.looseObject`, `z.record`) is open, as is anything under `anyOf`/`oneOf`/`allOf`.
 */
import type { JsonSchema } from '@conch/llm'

/** The known fields of one closed object level, and the closed levels below its properties. */
export interface FieldTree {
  readonly known: readonly string[]
  readonly children: ReadonlyMap<string, FieldTree>
}

/** One unknown field: its path from the arguments object and the fields its level takes. */
export interface UnknownField {
  readonly path: readonly string[]
  readonly known: readonly string[]
}

/** The closed levels of `schema`, or undefined when its top level is open. */
export function closeObjects(schema: JsonSchema): FieldTree | undefined {
  if (schema['type'] !== 'object') return undefined
  const properties = schema['properties']
  if (typeof properties !== 'object' || properties === null || Array.isArray(properties)) return undefined
  const additional = schema['additionalProperties']
  if (additional !== undefined && additional !== false) return undefined
  const children = new Map<string, FieldTree>()
  for (const [key, value] of Object.entries(properties as Record<string, unknown>)) {
    if (typeof value !== 'object' || value === null) continue
    const child = closeObjects(value as JsonSchema)
    if (child) children.set(key, child)
  }
  return { known: Object.keys(properties), children }
}

/** Every key of `input` that a closed level of `tree` does not name, depth first. */
export function unknownFields(tree: FieldTree, input: unknown, path: readonly string[] = []): UnknownField[] {
  if (typeof input !== 'object' || input === null || Array.isArray(input)) return []
  const found: UnknownField[] = []
  for (const [key, value] of Object.entries(input)) {
    if (!tree.known.includes(key)) {
      found.push({ path: [...path, key], known: tree.known })
      continue
    }
    const child = tree.children.get(key)
    if (child) found.push(...unknownFields(child, value, [...path, key]))
  }
  return found
}
