/**
 * The control channel under attack: the program has full Node APIs, so it can write anything to
 * fd 3. Every violation ends the run as `protocol` with the process gone; nothing it writes
 * reaches a binding that was not declared.
 */
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest'
import { FrameDecoder } from '../src/channel.ts'
import { boot, privateBootstrap, processesWith, type Harness } from './harness.ts'

// Every test starts real node processes (and bubblewrap); on a loaded 2-core machine one can take seconds.
vi.setConfig({ testTimeout: 60_000 })

const bootstrapPath = privateBootstrap()
let h: Harness
const calls: string[] = []
const bindings = [
  {
    global: 'host',
    functions: {
      ok: async (args: unknown) => (calls.push(`ok ${JSON.stringify(args)}`), 'fine'),
      secret: async () => (calls.push('secret'), 'leaked'),
      never: () => new Promise<never>(() => {}),
    },
  },
]

/** Program text defining `frame(obj)` (one length-prefixed frame) and `raw(buf)` (bytes) on fd 3. */
const WRITER = 'const fs = require("node:fs")\nconst raw = (b: Buffer) => fs.writeSync(3, b)\nconst frame = (m: unknown) => { const body = Buffer.from(JSON.stringify(m)); const head = Buffer.alloc(4); head.writeUInt32BE(body.length); raw(Buffer.concat([head, body])) }\n'

beforeAll(async () => {
  h = await boot({ runtime: { spare: false, bootstrapPath, maxMessageBytes: 65_536, maxChannelBytes: 1_048_576, maxPendingCalls: 8 } })
})
afterAll(async () => {
  await h.dispose()
  expect(processesWith(bootstrapPath)).toEqual([])
})

async function expectProtocol(code: string, pattern: RegExp): Promise<void> {
  calls.length = 0
  const result = await h.run(WRITER + code, { bindings: bindings as never })
  expect(result.ok, JSON.stringify(result)).toBe(false)
  if (result.ok) return
  expect(result.failure.kind).toBe('protocol')
  expect(result.failure.message).toMatch(pattern)
  expect(processesWith(bootstrapPath)).toEqual([])
}

describe('the control channel', () => {
  it('a forged call id is protocol, and the binding does not run', async () => {
    await expectProtocol('frame({ t: "call", id: 99, ns: "host", fn: "ok", args: 1 })\nawait new Promise(() => {})', /out of sequence/)
    expect(calls).toEqual([])
  })

  it('a reused call id is protocol', async () => {
    await expectProtocol('await host.ok(1)\nframe({ t: "call", id: 1, ns: "host", fn: "ok", args: 2 })\nawait new Promise(() => {})', /out of sequence/)
  })

  it('an undeclared binding name is protocol, and nothing is called', async () => {
    await expectProtocol('frame({ t: "call", id: 1, ns: "host", fn: "hasOwnProperty", args: null })\nawait new Promise(() => {})', /undeclared binding host\.hasOwnProperty/)
    await expectProtocol('frame({ t: "call", id: 1, ns: "other", fn: "ok", args: null })\nawait new Promise(() => {})', /undeclared binding other\.ok/)
    expect(calls).toEqual([])
  })

  it('a frame announcing more than maxMessageBytes is protocol before its body arrives', async () => {
    await expectProtocol('const head = Buffer.alloc(4); head.writeUInt32BE(0x7fffffff); raw(head)\nawait new Promise(() => {})', /exceeds maxMessageBytes/)
  })

  it('an oversized frame sent in pieces is protocol', async () => {
    await expectProtocol('const body = Buffer.alloc(70_000, 0x20); const head = Buffer.alloc(4); head.writeUInt32BE(body.length); raw(head); for (let i = 0; i < 70; i++) raw(body.subarray(i * 1000, (i + 1) * 1000))\nawait new Promise(() => {})', /exceeds maxMessageBytes/)
  })

  it('a frame that is not JSON, or of an unknown type, is protocol', async () => {
    await expectProtocol('const body = Buffer.from("{not json"); const head = Buffer.alloc(4); head.writeUInt32BE(body.length); raw(Buffer.concat([head, body]))\nawait new Promise(() => {})', /not JSON/)
    await expectProtocol('frame({ t: "exec", cmd: "rm -rf /" })\nawait new Promise(() => {})', /unknown control frame type/)
    await expectProtocol('frame([1, 2])\nawait new Promise(() => {})', /not a JSON object/)
  })

  it('a log frame with a field the channel does not define is protocol', async () => {
    await expectProtocol('frame({ t: "log", s: "out", text: "x", extra: [[[]]] })\nawait new Promise(() => {})', /log frame has an unknown field "extra"/)
  })

  it('a process that ends inside a frame it began is protocol, saying how much of it arrived', async () => {
    // The program announces 1000 bytes, sends 10, then returns: its own done frame lands inside
    // the unfinished one, and the process ends with the frame still short.
    await expectProtocol('const head = Buffer.alloc(4); head.writeUInt32BE(1000); raw(Buffer.concat([head, Buffer.from("{\\"t\\":\\"log\\"")]))\nreturn "real"', /ended inside a control frame: \d+ bytes of 1004 announced arrived/)
  })

  it('the frames of one run are charged against maxChannelBytes: calls past it end the run as protocol', async () => {
    await expectProtocol('for (let i = 0; i < 40; i++) await host.ok("x".repeat(50_000))\nreturn "all sent"', /exceeds maxChannelBytes 1048576/)
    expect(calls.length).toBeGreaterThan(10)
    expect(calls.length).toBeLessThan(21)
  })

  it('a huge frame over maxChannelBytes is refused at its length prefix: no more than one read of it is held', async () => {
    // The frame is under maxMessageBytes (the default), so only the run's budget stops it.
    const own = await boot({ runtime: { spare: false, bootstrapPath, maxChannelBytes: 8_388_608 } })
    const decode = FrameDecoder.prototype.feed
    let peak = 0
    const feed = vi.spyOn(FrameDecoder.prototype, 'feed').mockImplementation(function (this: FrameDecoder, chunk: Buffer) {
      const out = decode.call(this, chunk)
      peak = Math.max(peak, this.unfinished?.have ?? 0)
      return out
    })
    try {
      const program = 'const body = Buffer.alloc(120_000_000, 0x61); body.write(\'{"t":"log","s":"out","text":"\'); body.write(\'"}\', body.length - 2)\nconst head = Buffer.alloc(4); head.writeUInt32BE(body.length); raw(head)\nfor (let at = 0; at < body.length; at += 1_048_576) raw(body.subarray(at, at + 1_048_576))\nreturn "sent"'
      const result = await own.run(WRITER + program)
      expect(result, JSON.stringify(result).slice(0, 500)).toMatchObject({ ok: false, failure: { kind: 'protocol', message: expect.stringMatching(/a control frame of 120000000 bytes after \d+ bytes of this run exceeds maxChannelBytes 8388608/) } })
      expect(peak).toBeLessThanOrEqual(1_048_576)
    } finally {
      feed.mockRestore()
      await own.dispose()
    }
  })

  it('a flood of frames is protocol, not an unbounded queue', async () => {
    await expectProtocol('for (let i = 0; i < 100_000; i++) frame({ t: "ready" })\nawait new Promise(() => {})', /ready/)
  })

  it('exceeding maxPendingCalls is protocol', async () => {
    await expectProtocol('const all = []\nfor (let i = 0; i < 50; i++) all.push(host.never(i))\nawait Promise.all(all)', /maxPendingCalls 8/)
  })

  it('a program that stops reading its channel cannot make the host queue without bound', async () => {
    const big = 'x'.repeat(60_000)
    const flood = [{ global: 'host', functions: { big: async () => big } }]
    // The program blocks its event loop right after asking for large replies (each call frame
    // is written synchronously), so none of the replies is ever read.
    const result = await h.run({ code: 'for (let i = 0; i < 8; i++) void host.big(null)\nwhile (true) {}', timeoutMs: 20_000 }, { bindings: flood })
    expect(result).toMatchObject({ ok: false, failure: { kind: 'protocol', message: expect.stringMatching(/not reading its control channel/) } })
  })

  it('writes after the terminal frame are ignored: the result is the terminal frame, and the process is ended', async () => {
    calls.length = 0
    const result = await h.run(
      WRITER + 'frame({ t: "done", ok: true, value: "first" })\nframe({ t: "done", ok: true, value: "second" })\nframe({ t: "call", id: 1, ns: "host", fn: "secret", args: null })\nraw(Buffer.from("garbage"))\nawait new Promise(() => {})',
      { bindings: bindings as never },
    )
    expect(result, JSON.stringify(result)).toMatchObject({ ok: true, value: 'first' })
    expect(calls).toEqual([])
    expect(processesWith(bootstrapPath)).toEqual([])
  })

  it('a binding reply too large for one frame is an error in the program, not a crash', async () => {
    const huge = [{ global: 'host', functions: { huge: async () => 'y'.repeat(100_000) } }]
    const result = await h.run('try { await host.huge(null); return "got it" } catch (e) { return (e as Error).message }', { bindings: huge })
    expect(result).toMatchObject({ ok: true, value: expect.stringMatching(/host\.huge returned more than maxMessageBytes/) })
  })
})
