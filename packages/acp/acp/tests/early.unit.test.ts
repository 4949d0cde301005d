/**
 * `answerInitializeEarly`: `initialize` answered before the composition exists, and the server
 * that takes over later sees the whole input and answers the rest.
 */
import { PassThrough } from 'node:stream'
import { afterEach, describe, expect, it } from 'vitest'
import { answerInitializeEarly, Config, initializeResponse, runAcp } from '../src/index.ts'
import { compose, type Composed } from './harness.ts'

let composed: Composed | undefined
afterEach(async () => {
  await composed?.dispose()
  composed = undefined
})

/** The client's side of a pair of pipes: frames written to `stdin`, frames read from `stdout`. */
function pipes() {
  const stdin = new PassThrough()
  const stdout = new PassThrough()
  const frames: Record<string, unknown>[] = []
  const waiters: { match: (frame: Record<string, unknown>) => boolean; resolve: (frame: Record<string, unknown>) => void }[] = []
  let buffered = ''
  stdout.on('data', (chunk: Buffer) => {
    buffered += chunk.toString('utf8')
    for (let newline = buffered.indexOf('\n'); newline !== -1; newline = buffered.indexOf('\n')) {
      const frame = JSON.parse(buffered.slice(0, newline)) as Record<string, unknown>
      buffered = buffered.slice(newline + 1)
      frames.push(frame)
      for (const waiter of waiters.filter((w) => w.match(frame))) {
        waiters.splice(waiters.indexOf(waiter), 1)
        waiter.resolve(frame)
      }
    }
  })
  return {
    stdin,
    stdout,
    frames,
    send: (frame: object) => stdin.write(`${JSON.stringify(frame)}\n`),
    answer: (id: number) =>
      new Promise<Record<string, unknown>>((resolve) => {
        const found = frames.find((frame) => frame['id'] === id && !('method' in frame))
        if (found) resolve(found)
        else waiters.push({ match: (frame) => frame['id'] === id && !('method' in frame), resolve })
      }),
  }
}

const INITIALIZE = { jsonrpc: '2.0', id: 1, method: 'initialize', params: { protocolVersion: 1, clientCapabilities: {} } }

describe('answerInitializeEarly', () => {
  it('answers initialize before any composition exists, and the server it hands over to answers exactly the rest', async () => {
    const client = pipes()
    const mismatches: unknown[] = []
    const early = answerInitializeEarly({ input: client.stdin, output: client.stdout, onMismatch: (a, b) => mismatches.push([a, b]) })
    client.send(INITIALIZE)
    const initialized = await client.answer(1)
    expect(initialized).toEqual({ jsonrpc: '2.0', id: 1, result: initializeResponse(Config.parse(undefined)) })
    expect(early.answered).toBe(true)
    // Sent before the server runs: held until it reads.
    composed = await compose({ script: [{ text: 'unused' }] })
    client.send({ jsonrpc: '2.0', id: 2, method: 'session/new', params: { cwd: composed.workspace, mcpServers: [] } })

    const served = runAcp({ ctx: composed.ctx, input: early.input, output: early.output })
    const session = await client.answer(2)
    expect(session['result']).toEqual({ sessionId: expect.any(String) })
    client.stdin.end()
    await served
    // One answer per request: the server's own answer to initialize was dropped, and it matched.
    expect(client.frames.filter((frame) => frame['id'] === 1)).toHaveLength(1)
    expect(mismatches).toEqual([])
  })

  it('leaves a first frame that is not initialize to the server, which refuses it as usual', async () => {
    const client = pipes()
    const early = answerInitializeEarly({ input: client.stdin, output: client.stdout })
    composed = await compose({ script: [{ text: 'unused' }] })
    client.send({ jsonrpc: '2.0', id: 7, method: 'session/new', params: { cwd: composed.workspace, mcpServers: [] } })
    const served = runAcp({ ctx: composed.ctx, input: early.input, output: early.output })
    const refused = await client.answer(7)
    expect(early.answered).toBe(false)
    expect((refused['error'] as { code: number }).code).toBe(-32600)
    // initialize now reaches the server itself.
    client.send(INITIALIZE)
    expect((await client.answer(1))['result']).toEqual(initializeResponse(Config.parse(undefined)))
    client.stdin.end()
    await served
  })

  it('does not answer an initialize notification or one without a numeric protocol version', async () => {
    for (const frame of [
      { jsonrpc: '2.0', method: 'initialize', params: { protocolVersion: 1 } },
      { jsonrpc: '2.0', id: 3, method: 'initialize', params: { protocolVersion: '1' } },
      { jsonrpc: '2.0', id: 4, method: 'initialize' },
    ]) {
      const client = pipes()
      const early = answerInitializeEarly({ input: client.stdin, output: client.stdout })
      client.send(frame)
      // The peek has seen the whole line once the pass-through has it.
      await new Promise<void>((resolve) => early.input.once('readable', () => resolve()))
      expect(early.answered).toBe(false)
      expect(client.frames).toEqual([])
      early.close()
    }
  })

  it('close stops reading: nothing more reaches the server side', async () => {
    const client = pipes()
    const early = answerInitializeEarly({ input: client.stdin, output: client.stdout })
    const seen: Buffer[] = []
    early.input.on('data', (chunk: Buffer) => seen.push(chunk))
    const ended = new Promise((resolve) => early.input.once('end', resolve))
    early.close()
    await ended
    client.send(INITIALIZE)
    expect(seen).toEqual([])
    expect(client.frames).toEqual([])
  })
})
