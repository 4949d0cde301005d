/**
 * The host's file access inside a CLI's home (`home-fs.ts`, `transcript.ts`) on real files: links
 * at every step refused, names that are taken refused, a FIFO in a file's place neither blocks
 * nor is written, and transcripts read incrementally within their bounds.
 */
import { appendFileSync, linkSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, realpathSync, rmSync, statSync, symlinkSync, truncateSync, writeFileSync } from 'node:fs'
import { execFileSync } from 'node:child_process'
import { tmpdir } from 'node:os'
import path from 'node:path'
import { afterEach, describe, expect, it } from 'vitest'
import { openStateDir } from '../src/state-dir.ts'
import { nodeBeneathFs as nodeHomeFs, type BeneathFs as HomeFs } from '@conch/subprocess'
import { appendNoFollow, createHomeFile, makeHomeDir, PoolError, readNoFollow, TranscriptReader } from '../src/index.ts'

const made: string[] = []
afterEach(() => {
  for (const dir of made.splice(0)) rmSync(dir, { recursive: true, force: true })
})

/** A state folder with one home in it, and a host folder beside it. */
function layout() {
  const root = realpathSync(mkdtempSync(path.join(tmpdir(), 'home-fs-')))
  made.push(root)
  const state = path.join(root, 'state')
  const home = path.join(state, 'home-x')
  const host = path.join(root, 'host')
  mkdirSync(home, { recursive: true, mode: 0o700 })
  mkdirSync(host)
  return { state, home, host }
}

function refusal(run: () => unknown): PoolError {
  try {
    run()
  } catch (error) {
    expect(error).toBeInstanceOf(PoolError)
    expect((error as PoolError).code).toBe('HOME_PATH_UNSAFE')
    return error as PoolError
  }
  throw new Error('expected a refusal')
}

/** One turn of a Claude Code transcript: the user's line, then the assistant's answer. */
const line = (text: string) => `${JSON.stringify({ type: 'user', message: { content: 'q' } })}\n${JSON.stringify({ type: 'assistant', message: { content: [{ type: 'text', text }] } })}\n`

describe('files the host creates in a home', () => {
  it('are made with the mode asked for, and their folders 0700', () => {
    const { state, home } = layout()
    createHomeFile(state, path.join(home, '.claude', 'settings.json'), '{}', 0o600)
    expect(readFileSync(path.join(home, '.claude', 'settings.json'), 'utf8')).toBe('{}')
    expect(statSync(path.join(home, '.claude', 'settings.json')).mode & 0o777).toBe(0o600)
    expect(statSync(path.join(home, '.claude')).mode & 0o777).toBe(0o700)
  })

  it('are refused where a link, a file or a FIFO stands, and nothing is written through it', () => {
    const { state, home, host } = layout()
    const victim = path.join(host, 'victim')
    writeFileSync(victim, 'ORIGINAL')
    symlinkSync(victim, path.join(home, 'link.md'))
    expect(refusal(() => createHomeFile(state, path.join(home, 'link.md'), 'X')).message).toContain(`${home}/link.md already exists`)
    writeFileSync(path.join(home, 'plain.md'), 'mine')
    refusal(() => createHomeFile(state, path.join(home, 'plain.md'), 'X'))
    execFileSync('mkfifo', [path.join(home, 'fifo.md')])
    refusal(() => createHomeFile(state, path.join(home, 'fifo.md'), 'X'))
    expect(readFileSync(victim, 'utf8')).toBe('ORIGINAL')
    expect(readFileSync(path.join(home, 'plain.md'), 'utf8')).toBe('mine')
  })

  it('are refused below a folder that is a link, at any depth, and below a file', () => {
    const { state, home, host } = layout()
    symlinkSync(host, path.join(home, 'prompts'))
    expect(refusal(() => createHomeFile(state, path.join(home, 'prompts', 'p.md'), 'X')).message).toContain(`${home}/prompts is a symbolic link`)
    mkdirSync(path.join(host, 'b'))
    symlinkSync(host, path.join(home, 'a'))
    expect(refusal(() => createHomeFile(state, path.join(home, 'a', 'b', 'p.md'), 'X')).message).toContain(`${home}/a is a symbolic link`)
    writeFileSync(path.join(home, 'file'), '')
    expect(refusal(() => makeHomeDir(state, path.join(home, 'file', 'sub'))).message).toContain(`${home}/file is not a folder`)
    expect(readdirSync(host)).toEqual(['b'])
    expect(readdirSync(path.join(host, 'b'))).toEqual([])
  })

  it('follow no folder swapped for a link between two steps of the walk', () => {
    const { state, home, host } = layout()
    mkdirSync(path.join(home, 'a', 'b'), { recursive: true })
    mkdirSync(path.join(host, 'b'))
    // The moment after `a` was opened, the CLI renames it away and links the host folder in its place.
    let swapped = false
    const fs: HomeFs = {
      ...nodeHomeFs,
      open: (file, flags, mode) => {
        const fd = nodeHomeFs.open(file, flags, mode)
        if (!swapped && file.endsWith('/a')) {
          swapped = true
          execFileSync('mv', [path.join(home, 'a'), path.join(home, 'a-moved')])
          symlinkSync(host, path.join(home, 'a'))
        }
        return fd
      },
    }
    createHomeFile(state, path.join(home, 'a', 'b', 'p.md'), 'X', 0o600, fs)
    expect(swapped).toBe(true)
    // The file landed in the folder that was opened (now a-moved), not in the host's.
    expect(readFileSync(path.join(home, 'a-moved', 'b', 'p.md'), 'utf8')).toBe('X')
    expect(readdirSync(path.join(host, 'b'))).toEqual([])
  })
})

describe('the state folder the walk starts from', () => {
  it('must still be the folder the pool opened at load', () => {
    const { state, home } = layout()
    openStateDir(state, { field: 'stateDir' })
    createHomeFile(state, path.join(home, 'before.md'), 'X')
    // A process that can rename a folder above it puts another one, with the same home in it, in its place.
    execFileSync('mv', [state, `${state}-moved`])
    mkdirSync(home, { recursive: true, mode: 0o700 })
    expect(refusal(() => createHomeFile(state, path.join(home, 'after.md'), 'X')).message).toContain(`the pool's state folder ${state} was moved or replaced`)
    expect(readdirSync(home)).toEqual([])
  })
})

describe('a transcript read by the host', () => {
  const reader = (state: string, dir: string, bounds: { maxReadBytes?: number; maxLineBytes?: number } = {}) => {
    const warnings: string[] = []
    const read = new TranscriptReader({ base: state, dir, format: 'claude-jsonl', maxReadBytes: bounds.maxReadBytes ?? 1 << 20, maxLineBytes: bounds.maxLineBytes ?? 1 << 20, warn: (message) => warnings.push(message) })
    return { read, warnings }
  }

  it('is read on from where the last read stopped, at most maxReadBytes at a time, and a partial line waits for its end', () => {
    const { state, home } = layout()
    const dir = path.join(home, 'projects', 'p')
    mkdirSync(dir, { recursive: true })
    const file = path.join(dir, 't.jsonl')
    writeFileSync(file, line('first'))
    const { read } = reader(state, path.join(home, 'projects'), { maxReadBytes: 16 })
    let answer: string | undefined
    for (let i = 0; i < 20 && answer !== 'first'; i++) answer = read.read()
    expect(answer).toBe('first')
    const second = line('second')
    appendFileSync(file, second.slice(0, 60))
    expect(read.read()).toBe('first')
    appendFileSync(file, second.slice(60))
    for (let i = 0; i < 20 && answer !== 'second'; i++) answer = read.read()
    expect(answer).toBe('second')
  })

  it('starts over on a file that shrank or was replaced', () => {
    const { state, home } = layout()
    const file = path.join(home, 'projects', 't.jsonl')
    mkdirSync(path.dirname(file), { recursive: true })
    writeFileSync(file, line('old answer') + line('older still'))
    const { read } = reader(state, path.join(home, 'projects'))
    expect(read.read()).toBe('older still')
    writeFileSync(file, line('new'))
    expect(read.read()).toBe('new')
  })

  it('skips a line past maxLineBytes with a warning naming the file and the bound, and reads on after it', () => {
    const { state, home } = layout()
    const file = path.join(home, 'projects', 't.jsonl')
    mkdirSync(path.dirname(file), { recursive: true })
    writeFileSync(file, line('before') + line('x'.repeat(5000)) + line('after'))
    const { read, warnings } = reader(state, path.join(home, 'projects'), { maxReadBytes: 1000, maxLineBytes: 1000 })
    let answer: string | undefined
    for (let i = 0; i < 20 && answer !== 'after'; i++) answer = read.read()
    expect(answer).toBe('after')
    expect(warnings).toEqual([`pool: transcript ${file}: a line longer than 1000 bytes (transcript.maxLineBytes) is skipped; the answer is read from the screen`])
  })

  it('reads a huge sparse file without a line end a bounded piece per read, holding none of it', () => {
    const { state, home } = layout()
    const file = path.join(home, 'projects', 't.jsonl')
    mkdirSync(path.dirname(file), { recursive: true })
    writeFileSync(file, line('kept'))
    truncateSync(file, 1 << 30)
    const { read, warnings } = reader(state, path.join(home, 'projects'), { maxReadBytes: 1 << 20, maxLineBytes: 1 << 20 })
    const before = process.memoryUsage().arrayBuffers
    for (let i = 0; i < 8; i++) expect(read.read()).toBe('kept')
    expect(process.memoryUsage().arrayBuffers - before).toBeLessThan(16 << 20)
    expect(warnings).toHaveLength(1)
  })

  it('is not read through a link at the file or at a folder on the way', () => {
    const { state, home, host } = layout()
    writeFileSync(path.join(host, 'host.jsonl'), line('host secret'))
    mkdirSync(path.join(home, 'projects'))
    symlinkSync(path.join(host, 'host.jsonl'), path.join(home, 'projects', 't.jsonl'))
    expect(reader(state, path.join(home, 'projects')).read.read()).toBeUndefined()
    rmSync(path.join(home, 'projects'), { recursive: true })
    symlinkSync(host, path.join(home, 'projects'))
    const linked = reader(state, path.join(home, 'projects'))
    expect(linked.read.read()).toBeUndefined()
    expect(linked.read.read()).toBeUndefined()
    expect(linked.warnings).toEqual([`pool: transcript folder ${home}/projects is not read: ${home}/projects is a symbolic link; the pool never follows links in a CLI's home (the CLI may have planted it to redirect the host)`])
    rmSync(path.join(home, 'projects'))
    mkdirSync(path.join(home, 'projects'))
    symlinkSync(host, path.join(home, 'projects', 'p'))
    expect(reader(state, path.join(home, 'projects')).read.read()).toBeUndefined()
  })
})

describe('the failure log, appended to where a terminal may write', () => {
  it('is made with its folder, appended to, and read back at most maxBytes', () => {
    const { host } = layout()
    const log = path.join(host, '.conch', 'pool-failures.jsonl')
    appendNoFollow(log, 'one\n')
    appendNoFollow(log, 'two\n')
    expect(readFileSync(log, 'utf8')).toBe('one\ntwo\n')
    expect(statSync(log).mode & 0o777).toBe(0o600)
    expect(readNoFollow(log, 5)?.toString()).toBe('one\nt')
    expect(readNoFollow(path.join(host, 'missing', 'log'), 5)).toBeUndefined()
  })

  it('is refused as a link, below a link, as a hard link or as a FIFO, and nothing is written through it', () => {
    const { home, host } = layout()
    const victim = path.join(host, 'victim')
    writeFileSync(victim, 'ORIGINAL')
    symlinkSync(victim, path.join(home, 'link.jsonl'))
    refusal(() => appendNoFollow(path.join(home, 'link.jsonl'), 'x\n'))
    refusal(() => readNoFollow(path.join(home, 'link.jsonl'), 100))
    symlinkSync(host, path.join(home, 'linked-folder'))
    expect(refusal(() => appendNoFollow(path.join(home, 'linked-folder', 'victim'), 'x\n')).message).toContain(`${home}/linked-folder is a symbolic link`)
    linkSync(victim, path.join(home, 'hard.jsonl'))
    expect(refusal(() => appendNoFollow(path.join(home, 'hard.jsonl'), 'x\n')).message).toContain('single link')
    execFileSync('mkfifo', [path.join(home, 'fifo.jsonl')])
    refusal(() => appendNoFollow(path.join(home, 'fifo.jsonl'), 'x\n'))
    expect(readFileSync(victim, 'utf8')).toBe('ORIGINAL')
  })
})
