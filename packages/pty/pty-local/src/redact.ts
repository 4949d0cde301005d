/**
 * Replaces secret values in a terminal's raw output with `[secret NAME]`, before anything parses,
 * stores or shows it. Pure — no I/O, no timers.
 *
 * Works on bytes, as the terminal delivers them: a value split across chunks is still found,
 * because a chunk's tail that could begin a value is held back until the next chunk decides it
 * (`push`), or until the caller gives up waiting (`flush`, which releases it as it was).
 * Matches the exact bytes of a value; a program that prints a value changed (spaced, encoded,
 * reversed) is not recognised.
 */

/** The shortest value accepted, in UTF-8 bytes: a shorter one would match ordinary output and be replaced all over it. */
export const MIN_SECRET_BYTES = 8

interface Secret {
  name: string
  value: Buffer
  /** `[secret NAME]`, what the terminal shows instead. */
  label: Buffer
}

export class SecretRedactor {
  private secrets: Secret[] = []
  private held: Buffer = Buffer.alloc(0)
  private longest = 0

  /** Whether any value is registered (no work is done per chunk until one is). */
  get active(): boolean {
    return this.secrets.length > 0
  }

  /** Whether bytes are held back (the tail of the last chunk could begin a value). */
  get holding(): boolean {
    return this.held.length > 0
  }

  /**
   * Registers a value under `name`; re-registering a name replaces its value.
   * @throws RangeError for a value shorter than `MIN_SECRET_BYTES`.
   */
  add(name: string, value: string): void {
    const bytes = Buffer.from(value, 'utf8')
    if (bytes.length < MIN_SECRET_BYTES) throw new RangeError(`a secret value must be at least ${MIN_SECRET_BYTES} bytes`)
    this.secrets = this.secrets.filter((secret) => secret.name !== name && !secret.value.equals(bytes))
    this.secrets.push({ name, value: bytes, label: Buffer.from(`[secret ${name}]`, 'utf8') })
    // Longest first, so a value that contains another is replaced whole.
    this.secrets.sort((a, b) => b.value.length - a.value.length)
    this.longest = this.secrets[0]!.value.length
  }

  /**
   * `text` with every registered value replaced by its label: the second pass, over what the
   * model reads. The byte pass (`push`) cannot see a value whose pieces arrive more than the hold
   * apart, or are split by bytes the rendered text drops (an SGR reset, a NUL, a carriage return
   * that overwrites, a cursor move); the rendered text shows it whole, and this pass finds it.
   */
  redactText(text: string): string {
    if (this.secrets.length === 0) return text
    let out = text
    for (const secret of this.secrets) {
      const value = secret.value.toString('utf8')
      if (out.includes(value)) out = out.split(value).join(secret.label.toString('utf8'))
    }
    return out
  }

  /** The chunk with every complete value replaced, minus a tail that may begin one (held for the next call). */
  push(chunk: Uint8Array): Buffer {
    const input = Buffer.isBuffer(chunk) ? chunk : Buffer.from(chunk.buffer, chunk.byteOffset, chunk.byteLength)
    if (this.secrets.length === 0) return input
    const data = this.held.length === 0 ? input : Buffer.concat([this.held, input])
    this.held = Buffer.alloc(0)
    const out: Buffer[] = []
    let position = 0
    for (;;) {
      let best: { at: number; secret: Secret } | undefined
      for (const secret of this.secrets) {
        const at = data.indexOf(secret.value, position)
        if (at >= 0 && (best === undefined || at < best.at)) best = { at, secret }
      }
      if (best === undefined) break
      if (best.at > position) out.push(data.subarray(position, best.at))
      out.push(best.secret.label)
      position = best.at + best.secret.value.length
    }
    const keep = this.heldFrom(data, position)
    if (keep < data.length) this.held = Buffer.from(data.subarray(keep))
    if (keep > position) out.push(data.subarray(position, keep))
    return out.length === 1 ? out[0]! : Buffer.concat(out)
  }

  /** Releases the held tail unchanged (no value followed it in time). */
  flush(): Buffer {
    const held = this.held
    this.held = Buffer.alloc(0)
    return held
  }

  /** Where the held tail starts: the earliest position from which the rest is a proper prefix of some value. */
  private heldFrom(data: Buffer, from: number): number {
    const start = Math.max(from, data.length - this.longest + 1)
    for (let at = start; at < data.length; at++) {
      const rest = data.subarray(at)
      for (const secret of this.secrets) {
        if (rest.length < secret.value.length && secret.value.subarray(0, rest.length).equals(rest)) return at
      }
    }
    return data.length
  }
}
