/**
 * The WebAssembly side of the output parser (scan.wat, assembled into scan-wasm.ts): one module
 * instance with one linear memory, laid out as
 *
 *   [0, 128)            the state block (`ScanState`, scan.wat names each word)
 *   [LINES, EVENTS)     committed lines, a (start, end) pair of UTF-16 offsets each
 *   [EVENTS, INPUT)     events in order: OSC payloads and DEC private mode changes, 8 words each
 *   [INPUT, +n)         the bytes being parsed (copied in once per chunk)
 *   [output, …)         the text of the lines built (after the input, grown to fit)
 *
 * One pass (`scan`) runs at a time; the parser takes the scanner for a chunk (`acquire`) and
 * gives it back, so a listener that feeds another parser meanwhile gets the JavaScript path.
 */
import { SCAN_WASM_BASE64 } from './scan-wasm.ts'

/** Word indices of the state block (see scan.wat). */
export const S_POS = 0
export const S_END = 1
export const S_OUT = 2
export const S_LINE_START = 3
export const S_CURSOR = 4
export const S_LINE_ASCII = 5
export const S_LINE_START16 = 6
export const S_LINE_LENGTH16 = 7
export const S_CURSOR16 = 8
export const S_MAX_LINE16 = 9
export const S_MAX_SEQUENCE = 10
export const S_LINES = 11
export const S_EVENTS = 12
export const S_OUT_ASCII = 13
export const S_EDITS = 14
export const S_LINES_BASE = 15
export const S_LINES_END = 16
export const S_EVENTS_END = 17
export const S_QUIET = 18

/** Event kinds (word 0 of an event). */
export const EVENT_OSC = 2
export const EVENT_PRIVATE_MODES = 3

/** Lines and events one pass may record before it stops (and is called again). */
const LINE_CAPACITY = 8192
const EVENT_CAPACITY = 1024
export const LINES = 128
export const EVENTS = LINES + LINE_CAPACITY * 8
export const INPUT = EVENTS + EVENT_CAPACITY * 32
const PAGE = 65536

/** The parts of the WebAssembly JS API used here (the project's `lib` has no DOM types). */
interface WasmMemory {
  readonly buffer: ArrayBuffer
  grow(pages: number): number
}
interface WasmApi {
  Module: new (bytes: Uint8Array) => object
  Instance: new (module: object, imports: object) => { exports: Record<string, unknown> }
}
const wasm = (globalThis as unknown as { WebAssembly?: WasmApi }).WebAssembly

export class Scanner {
  readonly memory: WasmMemory
  private readonly run: () => void
  /** The memory as words and bytes (made again when it grows). */
  words: Int32Array
  bytes: Uint8Array
  /** Where the output starts for the current input. */
  output = INPUT
  busy = false

  constructor(api: WasmApi, module: object) {
    const instance = new api.Instance(module, {})
    this.memory = instance.exports.memory as WasmMemory
    this.run = instance.exports.scan as () => void
    this.words = new Int32Array(this.memory.buffer)
    this.bytes = new Uint8Array(this.memory.buffer)
  }

  /**
   * Copies `input` in and makes room for its output after it, with `lineBytes` more for the line
   * the pass continues (a little slack past each region: the pass may read a byte beyond its input).
   */
  load(input: Uint8Array, lineBytes: number): void {
    const output = (INPUT + input.length + 8 + 7) & ~7
    const need = output + input.length + lineBytes + 16
    if (need > this.memory.buffer.byteLength) {
      this.memory.grow(Math.ceil((need - this.memory.buffer.byteLength) / PAGE))
      this.words = new Int32Array(this.memory.buffer)
      this.bytes = new Uint8Array(this.memory.buffer)
    }
    this.bytes.set(input, INPUT)
    this.output = output
  }

  /** Calls of the pass so far (tests check that the pass was taken). */
  calls = 0

  scan(): void {
    this.calls++
    this.run()
  }
}

let shared: Scanner | undefined | null

/** The process's scanner, or undefined while one pass uses it (or where WebAssembly is missing). */
export function acquireScanner(): Scanner | undefined {
  if (shared === undefined) {
    try {
      shared = wasm === undefined ? null : new Scanner(wasm, new wasm.Module(Buffer.from(SCAN_WASM_BASE64, 'base64')))
    } catch {
      shared = null
    }
  }
  if (shared === null || shared.busy) return undefined
  shared.busy = true
  return shared
}

export function releaseScanner(scanner: Scanner): void {
  scanner.busy = false
}
