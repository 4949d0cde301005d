import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, unlinkSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join, relative } from 'node:path'
import { Context, type Message } from 'cordis'
import { afterEach, beforeEach, describe, expect, it } from 'vitest'
import SessionService, { SessionError, type SessionEvent } from '../src/index.ts'

let dir: string
let ctx: Context
let logs: Message[]
let fiber: { dispose(): Promise<void> } | undefined

async function boot(config: SessionService.Config = {}): Promise<SessionService> {
  ctx = new Context()
  logs = []
  ctx.logger.exporter({ export: (message) => void logs.push(message) })
  fiber = await ctx.plugin(SessionService, config)
  return ctx.sessions
}

function fileLines(file: string): SessionEvent[] {
  return readFileSync(file, 'utf8').split('\n').filter(Boolean).map((line) => JSON.parse(line) as SessionEvent)
}

function expectSessionError(fn: () => unknown, code: SessionError['code'], pattern: RegExp): void {
  let thrown: unknown
  try {
    fn()
  } catch (error) {
    thrown = error
  }
  expect(thrown).toBeInstanceOf(SessionError)
  expect((thrown as SessionError).code).toBe(code)
  expect((thrown as SessionError).message).toMatch(pattern)
}

beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), 'conch-session-'))
})

afterEach(async () => {
  await fiber?.dispose()
  fiber = undefined
  rmSync(dir, { recursive: true, force: true })
})

describe('creating and appending', () => {
  it('starts every session with session/start at seq 1 carrying the absolute workspace root', async () => {
    const sessions = await boot()
    const log = sessions.create({ workspaceRoot: 'some/relative/root' })
    expect(log.id).toMatch(/^session-[0-9a-f]{8}$/)
    const [first] = log.events()
    expect(first).toMatchObject({ seq: 1, sessionId: log.id, type: 'session/start' })
    expect(log.start.workspaceRoot).toBe(join(process.cwd(), 'some/relative/root'))
    expect(Number.isNaN(Date.parse(first!.ts))).toBe(false)
    expect(sessions.get(log.id)).toBe(log)
  })

  it('numbers events consecutively and finds the latest event of a type', async () => {
    const sessions = await boot()
    const log = sessions.create({ id: 'a' })
    log.append('user/message', { text: 'one' })
    log.append('assistant/message', { text: 'two' })
    const third = log.append('user/message', { text: 'three' })
    expect(third.seq).toBe(4)
    expect(log.events().map((event) => event.seq)).toEqual([1, 2, 3, 4])
    expect(log.last<{ text: string }>('user/message')?.data.text).toBe('three')
    expect(log.last('tool/result')).toBeUndefined()
  })

  it('stores the JSON form of the data, so a live event equals its replay', async () => {
    const sessions = await boot()
    const log = sessions.create({ id: 'json' })
    const event = log.append('x/y', { kept: 1, dropped: undefined, when: new Date(0) })
    expect(event.data).toEqual({ kept: 1, when: '1970-01-01T00:00:00.000Z' })
    expect(() => log.append('x/y', undefined)).toThrow(TypeError)
    expect(() => log.append('x/y', { big: 1n })).toThrow(TypeError)
    expect(log.events()).toHaveLength(2)
  })

  it('refuses a live id, an id already on disk, and ids that are not safe file names', async () => {
    const sessions = await boot({ dir })
    sessions.create({ id: 'taken' })
    expectSessionError(() => sessions.create({ id: 'taken' }), 'DUPLICATE_SESSION', /session taken is already live/)
    writeFileSync(join(dir, 'on-disk.jsonl'), '')
    expectSessionError(() => sessions.create({ id: 'on-disk' }), 'DUPLICATE_SESSION', /on-disk\.jsonl; open it/)
    for (const bad of ['../escape', 'a/b', '', '.hidden', 'x'.repeat(129)]) {
      expectSessionError(() => sessions.create({ id: bad }), 'INVALID_SESSION_ID', /invalid session id/)
    }
    expectSessionError(() => sessions.open('../etc/passwd'), 'INVALID_SESSION_ID', /invalid session id/)
  })
})

describe('bounds and memory', () => {
  it('an event over maxEventBytes has its longest strings cut, each with a notice, and records omittedBytes', async () => {
    const sessions = await boot({ dir, maxEventBytes: 4096 })
    const log = sessions.create({ id: 'big' })
    const event = log.append('tool/result', { callId: 'c', text: 'é'.repeat(10_000), meta: { note: 'x'.repeat(3000), small: 'kept' } })
    const [line] = readFileSync(join(dir, 'big.jsonl'), 'utf8').split('\n').filter((text) => text.includes('tool/result'))
    expect(Buffer.byteLength(line!)).toBeLessThanOrEqual(4096)
    const data = event.data as { callId: string; text: string; meta: { note: string; small: string } }
    expect(data.callId).toBe('c')
    expect(data.meta.small).toBe('kept')
    expect(data.text).toMatch(/^é+\n\[… \d+ bytes cut: a session event is bounded to maxEventBytes 4096\]$/)
    expect(event.omittedBytes).toBeGreaterThan(20_000 - 4096)
    expect(JSON.parse(line!)).toEqual(event)
    await fiber?.dispose()
    const replayed = (await boot({ dir, maxEventBytes: 4096 })).open('big')
    expect(replayed.events()[1]).toEqual(event)
  })

  it("a nested call's events are written and given to subscribers, not kept in memory; seq counts them", async () => {
    const sessions = await boot({ dir })
    const log = sessions.create({ id: 'nested' })
    const delivered: number[] = []
    sessions.subscribe((event) => void delivered.push(event.seq))
    log.append('tool/call', { callId: 'a', name: 'run_code', arguments: {} })
    for (let i = 1; i <= 100; i++) {
      log.append('tool/call', { callId: `a.${i}`, name: 'terminal_read', arguments: {}, parentCallId: 'a' })
      log.append('tool/result', { callId: `a.${i}`, name: 'terminal_read', isError: false, text: 'page', parentCallId: 'a' })
    }
    const last = log.append('tool/result', { callId: 'a', name: 'run_code', isError: false, text: 'done' })
    expect(last.seq).toBe(203)
    expect(delivered).toHaveLength(202)
    expect(log.events().map((event) => event.seq)).toEqual([1, 2, 203])
    expect(fileLines(join(dir, 'nested.jsonl'))).toHaveLength(203)
    await fiber?.dispose()
    const replayed = (await boot({ dir })).open('nested')
    expect(replayed.events().map((event) => event.seq)).toEqual([1, 2, 203])
    expect(replayed.append('user/message', { text: 'next' }).seq).toBe(204)
  })

  it('a log of several MiB is replayed a chunk at a time, multi-byte text across the chunk boundaries intact', async () => {
    const sessions = await boot({ dir })
    const log = sessions.create({ id: 'long' })
    for (let i = 0; i < 40; i++) log.append('user/message', { text: `${i} ${'é😀'.repeat(20_000 + i)}` })
    const live = log.events()
    await fiber?.dispose()
    const replayed = (await boot({ dir })).open('long')
    expect(replayed.events()).toEqual(live)
  })

  it('a redactor changes every string and key before the event is written, stored or delivered', async () => {
    const sessions = await boot({ dir })
    const log = sessions.create({ id: 'redact' })
    const delivered: unknown[] = []
    sessions.subscribe((event) => void delivered.push(event.data))
    sessions.redact({ redact: (text) => text.replaceAll('hunter2-value', '[secret PW]'), splitLive: (text) => ({ shown: text, held: '' }) })
    const event = log.append('tool/call', { arguments: { text: 'echo hunter2-value', list: ['a hunter2-value b', 3], 'hunter2-value': true } })
    const expected = { arguments: { text: 'echo [secret PW]', list: ['a [secret PW] b', 3], '[secret PW]': true } }
    expect(event.data).toEqual(expected)
    expect(delivered).toEqual([expected])
    expect(readFileSync(join(dir, 'redact.jsonl'), 'utf8')).not.toContain('hunter2-value')
    expect(log.redact('progress: hunter2-value')).toBe('progress: [secret PW]')
  })

  it('a live redaction holds back a tail that could begin a value, so a value split across pieces is found', async () => {
    const sessions = await boot()
    const log = sessions.create({ id: 'live' })
    const VALUE = 'hunter2-value'
    const redact = (text: string) => text.replaceAll(VALUE, '[secret PW]')
    sessions.redact({
      redact,
      splitLive(text) {
        const shown = redact(text)
        for (let at = Math.max(0, shown.length - VALUE.length + 1); at < shown.length; at++) {
          if (VALUE.startsWith(shown.slice(at))) return { shown: shown.slice(0, at), held: shown.slice(at) }
        }
        return { shown, held: '' }
      },
    })
    const live = log.liveRedaction()
    const pieces = ['the value is hun', 'ter2-va', 'lue, and hun', 'ch']
    const shown = pieces.map((piece) => live.push(piece))
    expect(shown).toEqual(['the value is ', '', '[secret PW], and ', 'hunc'])
    expect(live.push('', true)).toBe('h')
  })
})

describe('interceptors and subscribers', () => {
  it('runs interceptors in registration order before the event gets a seq', async () => {
    const sessions = await boot()
    const log = sessions.create({ id: 's' })
    const seen: string[] = []
    sessions.intercept((event) => void seen.push(`first ${event.type} len=${log.events().length}`))
    sessions.intercept((event) => void seen.push(`second ${event.type} len=${log.events().length}`))
    log.append('user/message', { text: 'hi' })
    expect(seen).toEqual(['first user/message len=1', 'second user/message len=1'])
  })

  it('a throwing interceptor vetoes the event: nothing stored or written, subscribers not called, error unchanged', async () => {
    const sessions = await boot({ dir })
    const log = sessions.create({ id: 'veto' })
    const file = join(dir, 'veto.jsonl')
    const before = readFileSync(file, 'utf8')
    const refusal = new Error('sandbox mode is fenced while terminals are open')
    const later: string[] = []
    const delivered: string[] = []
    sessions.intercept((event) => {
      if (event.type === 'sandbox/mode') throw refusal
    })
    sessions.intercept((event) => void later.push(event.type))
    sessions.subscribe((event) => void delivered.push(event.type))

    let thrown: unknown
    try {
      log.append('sandbox/mode', { mode: 'danger-full-access' })
    } catch (error) {
      thrown = error
    }
    expect(thrown).toBe(refusal)
    expect(log.events()).toHaveLength(1)
    expect(readFileSync(file, 'utf8')).toBe(before)
    expect(later).toEqual([])
    expect(delivered).toEqual([])

    const next = log.append('user/message', { text: 'after the veto' })
    expect(next.seq).toBe(2)
    expect(delivered).toEqual(['user/message'])
  })

  it('a vetoed session/start leaves neither a live session nor a file', async () => {
    const sessions = await boot({ dir })
    sessions.intercept((event) => {
      if (event.type === 'session/start') throw new Error('no new sessions now')
    })
    expect(() => sessions.create({ id: 'refused' })).toThrow('no new sessions now')
    expect(sessions.get('refused')).toBeUndefined()
    expect(existsSync(join(dir, 'refused.jsonl'))).toBe(false)
  })

  it('logs a failing subscriber instead of throwing, and still calls the others', async () => {
    const sessions = await boot()
    const log = sessions.create({ id: 'sub' })
    const delivered: number[] = []
    sessions.subscribe(() => {
      throw new Error('subscriber exploded')
    })
    sessions.subscribe((event) => void delivered.push(event.seq))
    expect(() => log.append('user/message', { text: 'x' })).not.toThrow()
    expect(delivered).toEqual([2])
    const warning = logs.find((message) => message.name === 'sessions' && message.type === 'warn')
    expect(String(warning?.args.join(' '))).toMatch(/subscriber exploded/)
  })

  it('removes a plugin’s interceptor and subscriber when that plugin is disposed', async () => {
    const sessions = await boot()
    const log = sessions.create({ id: 'scoped' })
    const calls: string[] = []
    const fence = await ctx.plugin({
      name: 'fence',
      inject: ['sessions'],
      apply: (pctx: Context) => {
        pctx.sessions.intercept(() => {
          calls.push('intercept')
          throw new Error('vetoed by fence')
        })
        pctx.sessions.subscribe(() => void calls.push('subscribe'))
      },
    })
    expect(() => log.append('user/message', {})).toThrow('vetoed by fence')
    await fence.dispose()
    log.append('user/message', {})
    expect(calls).toEqual(['intercept'])
  })

  it('the disposer returned by intercept unregisters it at once', async () => {
    const sessions = await boot()
    const log = sessions.create({ id: 'undo' })
    const dispose = sessions.intercept(() => {
      throw new Error('never')
    })
    dispose()
    expect(() => log.append('user/message', {})).not.toThrow()
  })
})

describe('persistence', () => {
  it('writes each event as one JSON line before append returns', async () => {
    const sessions = await boot({ dir })
    const log = sessions.create({ id: 'disk', workspaceRoot: '/work' })
    log.append('user/message', { text: 'héllo 🐚' })
    const lines = fileLines(join(dir, 'disk.jsonl'))
    expect(lines).toEqual(log.events())
    expect(statSync(join(dir, 'disk.jsonl')).mode & 0o777).toBe(0o600)
    expect(lines[1]).toMatchObject({ seq: 2, type: 'user/message', data: { text: 'héllo 🐚' } })
  })

  it('replays a closed session and keeps appending to the same file with the next seq', async () => {
    const sessions = await boot({ dir })
    const log = sessions.create({ id: 'round', workspaceRoot: '/work' })
    log.append('user/message', { text: 'a' })
    log.append('tool/result', { callId: 'c1', isError: false, text: 'out', meta: { n: 1 } })
    const original = [...log.events()]
    sessions.close('round')
    expect(sessions.get('round')).toBeUndefined()

    const reopened = sessions.open('round')
    expect(reopened).not.toBe(log)
    expect(reopened.events()).toEqual(original)
    expect(reopened.start).toEqual({ workspaceRoot: '/work' })
    expect(reopened.append('user/message', { text: 'b' }).seq).toBe(4)
    expect(fileLines(join(dir, 'round.jsonl')).map((event) => event.seq)).toEqual([1, 2, 3, 4])
    expect(sessions.open('round')).toBe(reopened)
  })

  it('replays a log written by an earlier service instance', async () => {
    const first = await boot({ dir })
    first.create({ id: 'restart' }).append('user/message', { text: 'before restart' })
    await fiber!.dispose()
    const second = await boot({ dir })
    expect(second.open('restart').last<{ text: string }>('user/message')?.data.text).toBe('before restart')
  })

  it('resolves a relative dir against the working directory and creates it on demand', async () => {
    const nested = join(dir, 'a', 'b')
    const sessions = await boot({ dir: relative(process.cwd(), nested) })
    expect(sessions.dir).toBe(nested)
    expect(existsSync(nested)).toBe(false)
    sessions.create({ id: 'rel' })
    expect(existsSync(join(nested, 'rel.jsonl'))).toBe(true)
  })

  it('names the file and line of a malformed log', async () => {
    const sessions = await boot({ dir })
    const good = JSON.stringify({ seq: 1, ts: 't', sessionId: 'bad', type: 'session/start', data: {} })
    const file = join(dir, 'bad.jsonl')
    writeFileSync(file, `${good}\n{"seq": 2, "ts": "t", "sessionId": "bad", "type": "user/mes`)
    expectSessionError(() => sessions.open('bad'), 'CORRUPT_LOG', new RegExp(`${file}:2: not valid JSON`))
    writeFileSync(file, `${good}\n\n${JSON.stringify({ seq: 3, ts: 't', sessionId: 'bad', type: 'x', data: 1 })}\n`)
    expectSessionError(() => sessions.open('bad'), 'CORRUPT_LOG', new RegExp(`${file}:3: expected seq 2, found 3`))
    writeFileSync(file, JSON.stringify({ seq: 1, ts: 't', sessionId: 'bad', type: 'user/message', data: {} }) + '\n')
    expectSessionError(() => sessions.open('bad'), 'CORRUPT_LOG', /bad\.jsonl:1: the first event must be session\/start/)
    writeFileSync(file, JSON.stringify({ seq: 1, ts: 't', sessionId: 'other', type: 'session/start', data: {} }) + '\n')
    expectSessionError(() => sessions.open('bad'), 'CORRUPT_LOG', /bad\.jsonl:1: "sessionId" is "other"/)
    expect(sessions.get('bad')).toBeUndefined()
  })

  it('reports NO_SESSION for an unknown id, saying when persistence is off', async () => {
    const persisted = await boot({ dir })
    expectSessionError(() => persisted.open('ghost'), 'NO_SESSION', /ghost\.jsonl does not exist/)
    await fiber!.dispose()
    const memory = await boot()
    expectSessionError(() => memory.open('ghost'), 'NO_SESSION', /not persisted \(set the sessions "dir" config/)
  })

  it('holds no descriptor between appends, and refuses an append once its log is gone, naming it', async () => {
    const sessions = await boot({ dir })
    const descriptors = () => readdirSync('/proc/self/fd').length
    const before = descriptors()
    const logs = Array.from({ length: 200 }, (_, index) => sessions.create({ id: `many-${index}` }))
    for (const log of logs) log.append('user/message', { text: 'hi' })
    expect(descriptors() - before).toBeLessThan(5)
    unlinkSync(join(dir, 'many-0.jsonl'))
    expectSessionError(() => logs[0]!.append('user/message', { text: 'lost' }), 'NO_SESSION', new RegExp(`^session log ${join(dir, 'many-0.jsonl')} is gone`))
    expect(logs[0]!.events()).toHaveLength(2)
  })

  it('keeps memory-only sessions out of the filesystem', async () => {
    const sessions = await boot()
    sessions.create({ id: 'mem' }).append('user/message', {})
    expect(sessions.dir).toBeUndefined()
    expect(existsSync(join(process.cwd(), 'mem.jsonl'))).toBe(false)
  })
})

describe('closing', () => {
  it('refuses appends on a closed session but keeps its file', async () => {
    const sessions = await boot({ dir })
    const log = sessions.create({ id: 'closing' })
    sessions.close('closing')
    sessions.close('closing')
    expectSessionError(() => log.append('user/message', {}), 'SESSION_CLOSED', /session closing is closed/)
    expect(fileLines(join(dir, 'closing.jsonl'))).toHaveLength(1)
  })

  it('closes every session when the service is disposed', async () => {
    const sessions = await boot()
    const log = sessions.create({ id: 'owned' })
    await fiber!.dispose()
    expectSessionError(() => log.append('user/message', {}), 'SESSION_CLOSED', /closed/)
  })

  it('rejects an invalid dir at load, naming the field', async () => {
    ctx = new Context()
    const errors: string[] = []
    ctx.logger.exporter({ export: (message) => void errors.push(message.args.map(String).join(' ')) })
    await expect(ctx.plugin(SessionService, { dir: '' })).rejects.toThrow(/at dir/)
  })
})
