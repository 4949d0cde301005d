/**
 * Node streams as the web streams a line protocol (ACP's `ndJsonStream`) reads and writes. The
 * output is never ended (it usually is stdout, which outlives the connection); the input is
 * paused and released when the connection stops reading it.
 */

export interface ReadableFromOptions {
  /**
   * Longest frame (one line, without its newline) passed on, in bytes. A longer one is cut: a
   * newline is passed on in its place (so the JSON-RPC layer answers the cut frame with a parse
   * error, `id: null` — JSON-RPC 2.0 §5.1) and the rest of the line is discarded. Default: no limit.
   */
  maxFrameBytes?: number
  /** Called once per cut frame, with the limit and the frame's first bytes (`HEAD_BYTES`, or the limit when smaller). */
  onOversized?(maxFrameBytes: number, head: Uint8Array): void
}

/** How much of a cut frame `onOversized` gets, in bytes: enough to name what it was. */
export const HEAD_BYTES = 120

/** Bytes of `input` until it ends (`end`), fails (`error`) or the reader cancels. */
export function readableFrom(input: NodeJS.ReadableStream, options: ReadableFromOptions = {}): ReadableStream<Uint8Array> {
  const encoder = new TextEncoder()
  const limit = options.maxFrameBytes ?? Number.POSITIVE_INFINITY
  const headBytes = options.onOversized ? Math.min(HEAD_BYTES, limit) : 0
  let release = () => {}
  /** Bytes of the current line passed on so far (the first ones kept), and whether its rest is being discarded. */
  const line: { bytes: number; head: Uint8Array; discarding: boolean } = { bytes: 0, head: new Uint8Array(0), discarding: false }
  const NEWLINE = new Uint8Array([10])
  return new ReadableStream<Uint8Array>({
    start(controller) {
      const pass = (bytes: Uint8Array) => {
        let start = 0
        while (start < bytes.length) {
          const newline = bytes.indexOf(10, start)
          const end = newline === -1 ? bytes.length : newline
          const length = end - start
          if (!line.discarding) {
            if (line.head.length < headBytes) {
              line.head = concat(line.head, bytes.subarray(start, Math.min(end, start + headBytes - line.head.length)))
            }
            if (line.bytes + length > limit) {
              const room = limit - line.bytes
              if (room > 0) controller.enqueue(bytes.slice(start, start + room))
              controller.enqueue(NEWLINE)
              line.discarding = true
              options.onOversized?.(limit, line.head)
            } else if (length > 0) {
              controller.enqueue(bytes.slice(start, end))
              line.bytes += length
            }
          }
          if (newline === -1) break
          if (!line.discarding) controller.enqueue(NEWLINE)
          line.bytes = 0
          line.head = new Uint8Array(0)
          line.discarding = false
          start = newline + 1
        }
      }
      const onData = (chunk: string | Uint8Array) => {
        pass(typeof chunk === 'string' ? encoder.encode(chunk) : new Uint8Array(chunk))
      }
      const onEnd = () => {
        release()
        controller.close()
      }
      const onError = (error: unknown) => {
        release()
        controller.error(error)
      }
      release = () => {
        input.off('data', onData)
        input.off('end', onEnd)
        input.off('close', onEnd)
        input.off('error', onError)
        input.pause()
      }
      input.on('data', onData)
      input.on('end', onEnd)
      input.on('close', onEnd)
      input.on('error', onError)
      input.resume()
    },
    cancel() {
      release()
    },
  })
}

function concat(a: Uint8Array, b: Uint8Array): Uint8Array {
  const joined = new Uint8Array(a.length + b.length)
  joined.set(a)
  joined.set(b, a.length)
  return joined
}

/** Writes each chunk to `output`, resolving when it was handed to the OS (the write callback). */
export function writableTo(output: NodeJS.WritableStream): WritableStream<Uint8Array> {
  return new WritableStream<Uint8Array>({
    write(chunk) {
      return new Promise<void>((resolve, reject) => {
        output.write(chunk, (error?: Error | null) => (error ? reject(error) : resolve()))
      })
    },
  })
}
