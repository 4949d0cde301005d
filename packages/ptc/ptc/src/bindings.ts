/**
 * Which names a binding may use. A namespace becomes a global of the program and its functions
 * properties of it, so both must be plain identifiers (ECMA-262 IdentifierName, ASCII subset)
 * that are not reserved words; a namespace must also not shadow a global the program relies on.
 */
import { PtcError, type PtcBinding } from './types.ts'

const IDENTIFIER = /^[A-Za-z_$][A-Za-z0-9_$]{0,63}$/

/** ECMA-262 reserved words and the strict-mode / module ones. */
const RESERVED_WORDS = new Set(
  (
    'await break case catch class const continue debugger default delete do else enum export extends false finally for ' +
    'function if implements import in instanceof interface let new null package private protected public return static ' +
    'super switch this throw true try typeof var void while with yield arguments eval'
  ).split(' '),
)

/** Globals of a Node program that a binding namespace may not replace. */
export const PROTECTED_GLOBALS: ReadonlySet<string> = new Set(
  (
    'globalThis global self window console process require module exports __filename __dirname Buffer ' +
    'Object Function Array String Number Boolean Symbol BigInt Math JSON Date RegExp Error TypeError RangeError ' +
    'SyntaxError ReferenceError EvalError URIError AggregateError Promise Proxy Reflect Map Set WeakMap WeakSet ' +
    'WeakRef FinalizationRegistry ArrayBuffer SharedArrayBuffer DataView Atomics Intl undefined NaN Infinity ' +
    'isNaN isFinite parseInt parseFloat encodeURI decodeURI encodeURIComponent decodeURIComponent escape unescape ' +
    'setTimeout clearTimeout setInterval clearInterval setImmediate clearImmediate queueMicrotask structuredClone ' +
    'fetch URL URLSearchParams TextEncoder TextDecoder AbortController AbortSignal Event EventTarget atob btoa ' +
    'performance crypto navigator WebAssembly Uint8Array Int8Array Uint16Array Int16Array Uint32Array Int32Array ' +
    'Float32Array Float64Array BigInt64Array BigUint64Array Uint8ClampedArray'
  ).split(' '),
)

/** Why `name` cannot name a namespace (`global`) or a function, or undefined when it can. */
export function nameProblem(name: string, role: 'global' | 'function'): string | undefined {
  if (typeof name !== 'string' || !IDENTIFIER.test(name)) return 'is not a portable identifier ([A-Za-z_$][A-Za-z0-9_$]*, at most 64 characters)'
  if (RESERVED_WORDS.has(name)) return 'is a reserved word'
  if (role === 'global' && PROTECTED_GLOBALS.has(name)) return 'would shadow a built-in global'
  if (role === 'function' && (name === '__proto__' || name === 'constructor' || name === 'prototype')) return 'is an Object.prototype property name'
  return undefined
}

/**
 * Checks every binding and returns them unchanged.
 * @throws PtcError `INVALID_OPTIONS` naming the first bad or duplicate name.
 */
export function checkBindings(bindings: readonly PtcBinding[]): readonly PtcBinding[] {
  const seen = new Set<string>()
  for (const binding of bindings) {
    const problem = nameProblem(binding.global, 'global')
    if (problem !== undefined) throw new PtcError('INVALID_OPTIONS', { field: `binding namespace ${JSON.stringify(binding.global)}`, problem })
    if (seen.has(binding.global)) throw new PtcError('INVALID_OPTIONS', { field: `binding namespace ${binding.global}`, problem: 'is declared twice' })
    seen.add(binding.global)
    if (typeof binding.functions !== 'object' || binding.functions === null) {
      throw new PtcError('INVALID_OPTIONS', { field: `binding namespace ${binding.global}`, problem: 'has no functions object' })
    }
    for (const [name, fn] of Object.entries(binding.functions)) {
      const bad = nameProblem(name, 'function')
      if (bad !== undefined) throw new PtcError('INVALID_OPTIONS', { field: `binding ${binding.global}.${name}`, problem: bad })
      if (typeof fn !== 'function') throw new PtcError('INVALID_OPTIONS', { field: `binding ${binding.global}.${name}`, problem: 'is not a function' })
    }
  }
  return bindings
}
