/**
 * "Did you mean …?": the nearest known name to a misspelt one, for unknown config keys (any
 * plugin's, read from its zod schema), unknown keys of cordis.yml rows and patches, values
 * outside a config enum, and unknown command-line options.
 */
import { distance as editDistance } from 'fastest-levenshtein'

/**
 * The known name nearest to `name`: one equal to it without regard to case, else the one
 * within Levenshtein distance 2 (insertions, deletions, substitutions), the nearest when
 * several are; undefined when none is that close or two are equally near.
 */
export function nearestName(name: string, known: Iterable<string>): string | undefined {
  const lower = name.toLowerCase()
  let best: string[] = []
  let bestDistance = 3
  for (const candidate of known) {
    if (candidate === name) continue
    const distance = candidate.toLowerCase() === lower ? 0 : editDistance(lower, candidate.toLowerCase())
    if (distance < bestDistance) {
      best = [candidate]
      bestDistance = distance
    } else if (distance === bestDistance && !best.includes(candidate)) {
      best.push(candidate)
    }
  }
  return best.length === 1 ? best[0] : undefined
}

/**
 * A config ValidationError's text with `; did you mean "key"?` after each unknown-key issue
 * (zod's `Unrecognized key(s): "a", "b" (at path)`, as cordis formats it) for which the
 * plugin's `Config` schema, at that path, has a near key (`nearestName`). Lines it cannot
 * match, and schemas that are not zod objects there, are left as they are.
 * @param message the ValidationError message, one issue a line: `  - text (at a.b)`; the top
 *   level is `(at )` or `(at the top level)`.
 */
export function suggestConfigKeys(message: string, schema: unknown, config?: unknown): string {
  return message
    .split('\n')
    .map((line) => {
      const match = /^\s*- (Unrecognized keys?|Invalid option): (.*) \(at (.*)\)$/.exec(line)
      if (match === null) return line
      const path = match[3] === '' || match[3] === 'the top level' ? [] : match[3]!.split('.')
      const quoted = [...match[2]!.matchAll(/"((?:[^"\\]|\\.)*)"/g)].map((key) => key[1]!)
      if (match[1] === 'Invalid option') {
        // `expected one of "a"|"b"`: the value given is read from the entry's config.
        const value = valueAt(config, path)
        return typeof value === 'string' ? `${line}${didYouMean([value], quoted)}` : line
      }
      const known = objectKeys(schema, path)
      return known === undefined ? line : `${line}${didYouMean(quoted, known)}`
    })
    .join('\n')
}

/**
 * `; did you mean "near"?` for the `names` that have a near one in `known` (`nearestName`;
 * `"near" for "name"` when there are several names), or '' when none has.
 */
export function didYouMean(names: readonly string[], known: readonly string[]): string {
  const hints: string[] = []
  for (const name of names) {
    const near = nearestName(name, known)
    if (near !== undefined) hints.push(names.length === 1 ? JSON.stringify(near) : `${JSON.stringify(near)} for ${JSON.stringify(name)}`)
  }
  return hints.length === 0 ? '' : `; did you mean ${hints.join(', ')}?`
}

function valueAt(value: unknown, path: readonly string[]): unknown {
  for (const segment of path) value = typeof value === 'object' && value !== null ? (value as Record<string, unknown>)[segment] : undefined
  return value
}

/** Wrappers zod 4 puts around a schema (`def.type`); the wrapped schema is `innerType` (a pipe's: `in`). */
const WRAPPERS = new Set(['default', 'prefault', 'optional', 'nullable', 'readonly', 'catch', 'nonoptional', 'pipe'])

/** The keys of the zod object schema at `path` in `schema`, or undefined when there is none. */
export function objectKeys(schema: unknown, path: readonly (string | number | symbol)[]): string[] | undefined {
  let node = schema
  for (let index = 0; ; ) {
    const def = (node as { _zod?: { def?: Record<string, unknown> } } | undefined)?._zod?.def
    if (def === undefined) return undefined
    const type = def['type'] as string
    if (WRAPPERS.has(type)) {
      node = def[type === 'pipe' ? 'in' : 'innerType']
      continue
    }
    if (type === 'lazy' && typeof def['getter'] === 'function') {
      node = (def['getter'] as () => unknown)()
      continue
    }
    if (index === path.length) return type === 'object' ? Object.keys(def['shape'] as object) : undefined
    const segment = String(path[index++]!)
    if (type === 'object') node = (def['shape'] as Record<string, unknown>)[segment]
    else if (type === 'array') node = def['element']
    else if (type === 'record') node = def['valueType']
    else return undefined
  }
}
