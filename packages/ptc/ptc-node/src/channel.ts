/**
 * The control channel between the host and the program's process on the child's fd 3: frames of
 * a 4-byte big-endian byte length, then that many bytes of UTF-8 JSON.
 *
 * The peer is hostile: every inbound frame is bounded (`maxMessageBytes`, and the rest of the
 * run's `maxChannelBytes`, checked on the length prefix before any body byte is kept) and must be
 * JSON of a known shape; queued outbound bytes are bounded too. A violation is a `ChannelError`.
 */
import { errorClass, type ErrorMessages, type ErrorOf } from '@conch/errors'
import type { Duplex } from 'node:stream'

const CHANNEL_ERRORS = {
  /** One outbound frame of `bytes` is larger than `maxMessageBytes` (the sender's problem, not the peer's). */
  FRAME_TOO_LARGE: (d: { bytes: number; maxMessageBytes: number }) => `a ${d.bytes}-byte frame to the program exceeds maxMessageBytes ${d.maxMessageBytes}`,
  /** The peer broke the protocol; `problem` says how (which frame, which field). */
  CHANNEL_VIOLATION: (d: { problem: string }) => d.problem,
} satisfies ErrorMessages

export const ChannelError = errorClass('ChannelError', CHANNEL_ERRORS)
export type ChannelError = ErrorOf<typeof CHANNEL_ERRORS>

/** The peer broke the protocol: `problem` says how. */
export const violation = (problem: string): ChannelError => new ChannelError('CHANNEL_VIOLATION', { problem })

/** A message the program's process may send. */
export type ChildMessage =
  | { t: 'ready' }
  | { t: 'log'; s: 'out' | 'err'; text: string }
  | { t: 'call'; id: number; ns: string; fn: string; args: unknown }
  | { t: 'done'; ok: true; value: unknown }
  | { t: 'done'; ok: false; kind: 'exception' | 'invalid-output' | 'output-limit'; message: string; stack?: string }

/** A message the host sends. */
export type HostMessage =
  /** To a spare, while it waits: load what the program's binding calls will need. */
  | { t: 'prepare' }
  | { t: 'run'; code: string; bindings: Record<string, string[]>; maxOutputBytes: number }
  | { t: 'reply'; id: number; ok: true; value: unknown }
  | { t: 'reply'; id: number; ok: false; message: string }

/** Encodes one frame, in one buffer. */
export function encodeFrame(message: HostMessage | ChildMessage): Buffer {
  const json = JSON.stringify(message)
  const length = Buffer.byteLength(json, 'utf8')
  const frame = Buffer.allocUnsafe(4 + length)
  frame.writeUInt32BE(length, 0)
  frame.write(json, 4, length, 'utf8')
  return frame
}

/**
 * Splits bytes into frames: `feed(chunk)` returns the complete frames' bodies parsed as JSON, in
 * order, and the first violation after them (frames before it still count); after a violation,
 * nothing. Chunks are joined once, when their frame is complete. Each frame is charged against
 * `maxTotalBytes` (the channel's budget) at its length prefix, before its body is kept.
 */
export class FrameDecoder {
  private chunks: Buffer[] = []
  private buffered = 0
  /** 4 + the body length of the frame being assembled, once its prefix is read. */
  private needed: number | undefined
  private total = 0
  private broken = false

  constructor(
    private readonly maxMessageBytes: number,
    private readonly maxTotalBytes: number = Number.POSITIVE_INFINITY,
  ) {}

  feed(chunk: Buffer): { frames: unknown[]; error?: ChannelError } {
    const frames: unknown[] = []
    if (this.broken) return { frames }
    this.chunks.push(chunk)
    this.buffered += chunk.length
    while (true) {
      if (this.needed === undefined) {
        if (this.buffered < 4) break
        const length = this.take(4).readUInt32BE(0)
        if (length > this.maxMessageBytes) return this.fail(frames, `a control frame of ${length} bytes exceeds maxMessageBytes ${this.maxMessageBytes}`)
        if (this.total + 4 + length > this.maxTotalBytes) {
          return this.fail(frames, `a control frame of ${length} bytes after ${this.total} bytes of this run exceeds maxChannelBytes ${this.maxTotalBytes}`)
        }
        this.total += 4 + length
        this.needed = length
      }
      if (this.buffered < this.needed) break
      const body = this.take(this.needed)
      this.needed = undefined
      try {
        frames.push(JSON.parse(body.toString('utf8')))
      } catch {
        return this.fail(frames, `a control frame of ${body.length} bytes is not JSON`)
      }
    }
    return { frames }
  }

  /**
   * What of an unfinished frame is buffered: `have` bytes of `announced` (4 + the prefix's length;
   * undefined while the prefix is incomplete). Undefined when none is, or after a violation.
   */
  get unfinished(): { have: number; announced: number | undefined } | undefined {
    if (this.broken) return undefined
    if (this.needed !== undefined) return { have: 4 + this.buffered, announced: 4 + this.needed }
    return this.buffered === 0 ? undefined : { have: this.buffered, announced: undefined }
  }

  /** The first `n` buffered bytes (`n` ≤ `buffered`), removed; a copy only when they span chunks. */
  private take(n: number): Buffer {
    const first = this.chunks[0]!
    let out: Buffer
    if (first.length >= n) {
      out = first.subarray(0, n)
      if (first.length === n) this.chunks.shift()
      else this.chunks[0] = first.subarray(n)
    } else {
      let count = 0
      let have = 0
      while (have < n) have += this.chunks[count++]!.length
      const pieces = this.chunks.splice(0, count)
      out = Buffer.concat(pieces, n)
      if (have > n) {
        const last = pieces[count - 1]!
        this.chunks.unshift(last.subarray(last.length - (have - n)))
      }
    }
    this.buffered -= n
    return out
  }

  private fail(frames: unknown[], message: string): { frames: unknown[]; error: ChannelError } {
    this.broken = true
    this.chunks = []
    this.buffered = 0
    return { frames, error: violation(message) }
  }
}

const isObject = (value: unknown): value is Record<string, unknown> => typeof value === 'object' && value !== null && !Array.isArray(value)

/**
 * Checks the shape of an inbound message.
 * @throws ChannelError naming what is wrong (unknown type, a missing or mistyped field).
 */
export function parseChildMessage(value: unknown): ChildMessage {
  if (!isObject(value)) throw violation('a control frame is not a JSON object')
  switch (value['t']) {
    case 'ready':
      return { t: 'ready' }
    case 'log':
      if ((value['s'] !== 'out' && value['s'] !== 'err') || typeof value['text'] !== 'string') throw violation('a log frame needs s: "out"|"err" and text: string')
      for (const key of Object.keys(value)) {
        if (key !== 't' && key !== 's' && key !== 'text') throw violation(`a log frame has an unknown field ${JSON.stringify(key)}`)
      }
      return { t: 'log', s: value['s'], text: value['text'] }
    case 'call': {
      const { id, ns, fn } = value
      if (typeof id !== 'number' || !Number.isSafeInteger(id) || id < 1) throw violation(`a call frame has an invalid id ${JSON.stringify(id)}`)
      if (typeof ns !== 'string' || typeof fn !== 'string') throw violation(`call ${id} does not name a binding (ns and fn must be strings)`)
      return { t: 'call', id, ns, fn, args: value['args'] ?? null }
    }
    case 'done':
      if (value['ok'] === true) {
        if (!('value' in value)) throw violation('a done frame with ok: true has no value')
        return { t: 'done', ok: true, value: value['value'] }
      }
      if (value['ok'] === false) {
        const kind = value['kind']
        if (kind !== 'exception' && kind !== 'invalid-output' && kind !== 'output-limit') throw violation(`a done frame names an unknown failure kind ${JSON.stringify(kind)}`)
        if (typeof value['message'] !== 'string') throw violation('a done frame with ok: false has no message')
        const done: ChildMessage = { t: 'done', ok: false, kind, message: value['message'] }
        if (typeof value['stack'] === 'string') done.stack = value['stack']
        return done
      }
      throw violation('a done frame needs ok: true or false')
    default:
      throw violation(`unknown control frame type ${JSON.stringify(value['t'])}`)
  }
}

/** Writes frames to the child; a write that would leave more than `maxMessageBytes` queued throws. */
export class FrameWriter {
  constructor(
    private readonly stream: Duplex,
    private readonly maxMessageBytes: number,
  ) {}

  /** @throws ChannelError when the frame or the queue would exceed `maxMessageBytes`. */
  write(message: HostMessage): void {
    const frame = encodeFrame(message)
    if (frame.length - 4 > this.maxMessageBytes) {
      throw new ChannelError('FRAME_TOO_LARGE', { bytes: frame.length, maxMessageBytes: this.maxMessageBytes })
    }
    if (this.stream.writableLength + frame.length > this.maxMessageBytes) {
      throw violation(`the program is not reading its control channel: ${this.stream.writableLength} bytes are queued (maxMessageBytes ${this.maxMessageBytes})`)
    }
    if (!this.stream.writableEnded && !this.stream.destroyed) this.stream.write(frame)
  }
}
