/** Test helper: collects a stream's text and resolves when a line matching a pattern appears. */
export class LineReader {
  private text = ''
  private waiters: Array<{ pattern: RegExp; resolve: (match: RegExpMatchArray) => void }> = []
  private ended = false
  private endWaiters: Array<() => void> = []

  constructor(stream: NodeJS.ReadableStream) {
    stream.setEncoding('utf8')
    stream.on('data', (chunk: string) => {
      this.text += chunk
      this.check()
    })
    stream.on('end', () => {
      this.ended = true
      for (const resolve of this.endWaiters.splice(0)) resolve()
    })
  }

  get all(): string {
    return this.text
  }

  /** Resolves with the first complete line matching `pattern` (already received or yet to come). */
  line(pattern: RegExp): Promise<RegExpMatchArray> {
    return new Promise((resolve) => {
      this.waiters.push({ pattern, resolve })
      this.check()
    })
  }

  /** Resolves when the stream has ended. */
  end(): Promise<void> {
    if (this.ended) return Promise.resolve()
    return new Promise((resolve) => this.endWaiters.push(resolve))
  }

  private check(): void {
    const lines = this.text.split('\n').slice(0, -1)
    this.waiters = this.waiters.filter((waiter) => {
      for (const line of lines) {
        const match = waiter.pattern.exec(line)
        if (match) {
          waiter.resolve(match)
          return false
        }
      }
      return true
    })
  }
}
