/**
 * Making a transcript comparable across runs and machines. Every rule replaces what varies with
 * a placeholder that says what it was; nothing else is touched. The rules, and which apply to
 * pinned runs and which to real ones only, are tabled in the README ("Normalisation").
 */
import { realpathSync } from 'node:fs'

export type RunKind = 'pinned' | 'real'

export interface NormaliseOptions {
  kind: RunKind
  /** Absolute folders to replace with `<workspace>` (their real paths are added). */
  workspaces: readonly string[]
}

const TIME_KEYS: ReadonlySet<string> = new Set(['createdAt', 'startedAt', 'endedAt'])
const DURATION_KEYS: ReadonlySet<string> = new Set(['elapsedMs', 'durationMs'])

export class Normaliser {
  private readonly kind: RunKind
  private readonly paths: string[]
  private readonly sessionNumber = numbering<string>()

  constructor(options: NormaliseOptions) {
    this.kind = options.kind
    const paths = new Set<string>()
    for (const path of options.workspaces) {
      paths.add(path)
      try {
        paths.add(realpathSync(path))
      } catch {
        // A folder that does not exist (any more) is replaced as given.
      }
    }
    // Longest first, so a folder inside another is not half-replaced.
    this.paths = [...paths].sort((a, b) => b.length - a.length)
  }

  /** A JSON value with every rule applied (a deep copy). */
  value(value: unknown): unknown {
    return this.walk(value, undefined)
  }

  /** One string with the text rules applied. */
  text(text: string): string {
    let out = text
    for (const path of this.paths) out = out.split(path).join('<workspace>')
    out = out.replace(/\bsession-[0-9a-f]{8}\b/g, (id) => `session-${this.sessionNumber(id)}`)
    out = out.replace(/(\[run_code: [a-z-]+ (?:in|after) )\d+( ms\b)/g, '$1<ms>$2')
    if (this.kind === 'real') {
      out = out
        .replace(/^(\[closed: [^\]\n]*? — )stopped \d+ process(?:es)?: [^\n]*\]$/gm, '$1stopped <processes>]')
        .replace(/^(\[closed: [^\n]*\n\[session: exited )[^\]\n]*\]/gm, '$1<status>]')
        .replace(/\b([A-Za-z_][\w.+-]*)\[\d+\]/g, '$1[<pid>]')
        .replace(/\bpid (\d+)\b/g, 'pid <pid>')
        .replace(/\/dev\/pts\/\d+/g, '/dev/pts/<n>')
    }
    return out
  }

  private walk(value: unknown, key: string | undefined): unknown {
    if (key !== undefined && TIME_KEYS.has(key) && (typeof value === 'number' || typeof value === 'string')) return '<time>'
    if (this.kind === 'real' && key !== undefined) {
      if (DURATION_KEYS.has(key) && typeof value === 'number') return '<ms>'
      if (key === 'pid' && typeof value === 'number') return '<pid>'
      if (key === 'evidence' && value !== null && typeof value === 'object') return '<evidence>'
      if (key === 'stopped' && Array.isArray(value)) return '<processes>'
    }
    if (typeof value === 'string') return this.text(value)
    if (Array.isArray(value)) return value.map((item) => this.walk(item, undefined))
    if (value !== null && typeof value === 'object') {
      // A close result ({status, stopped, survivors}): how the shell ended is a race (see above).
      const closed = this.kind === 'real' && 'stopped' in value && 'status' in value
      return Object.fromEntries(Object.entries(value).map(([k, v]) => [this.text(k), closed && k === 'status' ? '<status>' : this.walk(v, k)]))
    }
    return value
  }
}

/**
 * JSON-RPC ids → 1, 2, … in order of first appearance, so the expectation does not depend on
 * how the client numbers its requests.
 */
export function renumberIds(frames: readonly Record<string, unknown>[]): Record<string, unknown>[] {
  const id = numbering<unknown>()
  return frames.map((frame) => (!('id' in frame) || frame['id'] === null ? frame : { ...frame, id: id(frame['id']) }))
}

/** 1, 2, … for each key in order of its first appearance. */
function numbering<K>(): (key: K) => number {
  const numbers = new Map<K, number>()
  return (key) => {
    if (!numbers.has(key)) numbers.set(key, numbers.size + 1)
    return numbers.get(key)!
  }
}

/**
 * Live terminal output of a running call arrives in as many `tool_call_update`s as the
 * terminal's timing makes (each holding all the output so far); a run of them for one call is
 * collapsed to its last, which holds all of it.
 */
export function collapseLiveOutput(frames: readonly Record<string, unknown>[]): Record<string, unknown>[] {
  const out: Record<string, unknown>[] = []
  for (const frame of frames) {
    const call = liveCall(frame)
    const previous = out.at(-1)
    if (call !== undefined && previous !== undefined && liveCall(previous) === call) out[out.length - 1] = frame
    else out.push(frame)
  }
  return out
}

/** The tool call id of a live-output update (content, no status), else undefined. */
function liveCall(frame: Record<string, unknown>): string | undefined {
  if (frame['method'] !== 'session/update') return undefined
  const update = (frame['params'] as { update?: Record<string, unknown> } | undefined)?.update
  if (update?.['sessionUpdate'] !== 'tool_call_update' || update['status'] != null || update['content'] == null) return undefined
  return update['toolCallId'] as string
}
