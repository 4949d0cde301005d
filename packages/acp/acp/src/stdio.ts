/**
 * Node streams as the web streams `ndJsonStream` reads and writes. The output is never ended
 * (it is usually the process's stdout, which outlives the connection); the input is paused
 * and released when the connection stops reading it.
 */

/** Bytes of `input` until it ends (`end`), fails (`error`) or the reader cancels. */
export function readableFrom(input: NodeJS.ReadableStream): ReadableStream<Uint8Array> {
  const encoder = new TextEncoder()
  let release = () => {}
  return new ReadableStream<Uint8Array>({
    start(controller) {
      const onData = (chunk: string | Uint8Array) => {
        controller.enqueue(typeof chunk === 'string' ? encoder.encode(chunk) : new Uint8Array(chunk))
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
