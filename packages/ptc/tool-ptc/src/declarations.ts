/**
 * TypeScript declarations of the tools a program can call, generated from each tool's JSON
 * Schema (the one the model is offered, from its zod input schema), so the model knows the
 * call shapes. Covers the JSON Schema subset `z.toJSONSchema` emits for tool inputs: object,
 * string, number, integer, boolean, null, array, enum, const, anyOf/oneOf; anything else is
 * `unknown`.
 */
import type { JsonSchema } from '@conch/llm'

/** What every `tools.<name>(args)` call resolves to. */
export const TOOL_RESULT_TYPE = 'type ToolResult = { text: string; isError: boolean; meta: Record<string, unknown> | null }'

/** One TypeScript type for a JSON Schema node. */
export function schemaToType(schema: unknown, indent = ''): string {
  if (typeof schema !== 'object' || schema === null) return 'unknown'
  const node = schema as Record<string, unknown>
  if ('const' in node) return JSON.stringify(node['const'])
  if (Array.isArray(node['enum'])) return node['enum'].map((value) => JSON.stringify(value)).join(' | ')
  const union = (node['anyOf'] ?? node['oneOf']) as unknown[] | undefined
  if (Array.isArray(union)) return union.map((item) => schemaToType(item, indent)).join(' | ')
  const type = node['type']
  if (Array.isArray(type)) return type.map((item) => schemaToType({ ...node, type: item }, indent)).join(' | ')
  switch (type) {
    case 'string':
      return 'string'
    case 'number':
    case 'integer':
      return 'number'
    case 'boolean':
      return 'boolean'
    case 'null':
      return 'null'
    case 'array':
      return `Array<${schemaToType(node['items'], indent)}>`
    case 'object': {
      const properties = (node['properties'] ?? {}) as Record<string, unknown>
      const required = new Set((node['required'] ?? []) as string[])
      const inner = `${indent}  `
      const lines = Object.entries(properties).map(([key, value]) => {
        const description = (value as { description?: unknown }).description
        const doc = typeof description === 'string' ? `${inner}/** ${oneLine(description)} */\n` : ''
        const name = /^[A-Za-z_$][A-Za-z0-9_$]*$/.test(key) ? key : JSON.stringify(key)
        return `${doc}${inner}${name}${required.has(key) ? '' : '?'}: ${schemaToType(value, inner)}`
      })
      if (lines.length === 0) return node['additionalProperties'] === false ? '{}' : 'Record<string, unknown>'
      return `{\n${lines.join('\n')}\n${indent}}`
    }
    default:
      return 'unknown'
  }
}

/** A block declaring `tools` with one method per tool, each documented by the first sentence of its description. */
export function toolDeclarations(tools: readonly { name: string; description: string; parameters: JsonSchema }[]): string {
  const methods = tools.map((tool) => `  /** ${firstSentence(tool.description)} */\n  ${tool.name}(args: ${schemaToType(tool.parameters, '  ')}): Promise<ToolResult>`)
  return [TOOL_RESULT_TYPE, `declare const tools: {\n${methods.join('\n')}\n}`].join('\n')
}

function oneLine(text: string): string {
  return text.replace(/\s+/g, ' ').replace(/\*\//g, '* /').trim()
}

/** Up to the first period that ends a sentence (followed by a capital or the end; "e.g." is not one), outside parentheses. */
function firstSentence(text: string): string {
  const line = oneLine(text)
  let depth = 0
  for (let index = 0; index < line.length; index++) {
    const char = line[index]
    if (char === '(') depth++
    else if (char === ')') depth = Math.max(0, depth - 1)
    else if (char === '.' && depth === 0 && (index === line.length - 1 || /^\s+[A-Z[`]/.test(line.slice(index + 1, index + 3)))) return line.slice(0, index + 1)
  }
  return line
}
