/**
 * Lossless JSON: a value `JSON.stringify` → `JSON.parse` gives back unchanged — plain objects
 * (prototype `Object.prototype` or null) with string keys, dense arrays, strings, finite numbers,
 * booleans and null.
 */
import type { JsonValue } from './types.ts'

/** Where `value` stops being lossless JSON (a path such as `$.a[2]` and why), or undefined when it is. */
export function isLosslessJson(value: unknown): string | undefined {
  const stack = new Set<object>()
  const walk = (item: unknown, path: string): string | undefined => {
    switch (typeof item) {
      case 'string':
      case 'boolean':
        return undefined
      case 'number':
        return Number.isFinite(item) ? undefined : `${path} is ${String(item)}`
      case 'undefined':
        return `${path} is undefined`
      case 'bigint':
        return `${path} is a BigInt`
      case 'function':
      case 'symbol':
        return `${path} is a ${typeof item}`
      case 'object': {
        if (item === null) return undefined
        if (stack.has(item)) return `${path} is a cycle`
        stack.add(item)
        try {
          if (Array.isArray(item)) {
            for (let index = 0; index < item.length; index++) {
              if (!(index in item)) return `${path}[${index}] is a hole`
              const bad = walk(item[index], `${path}[${index}]`)
              if (bad !== undefined) return bad
            }
            return undefined
          }
          const proto = Object.getPrototypeOf(item)
          if (proto !== Object.prototype && proto !== null) return `${path} is not a plain object`
          if (Object.getOwnPropertySymbols(item).length > 0) return `${path} has symbol keys`
          for (const [key, child] of Object.entries(item)) {
            const bad = walk(child, `${path}.${key}`)
            if (bad !== undefined) return bad
          }
          return undefined
        } finally {
          stack.delete(item)
        }
      }
    }
  }
  return walk(value, '$')
}

export type { JsonValue }
