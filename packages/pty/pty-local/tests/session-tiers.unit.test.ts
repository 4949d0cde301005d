/**
 * The readiness state machine with a fake terminal and a fake inspector, for the races that
 * need exact ordering: the foreground handoff, child-shell markers, split markers, stale
 * prompts, evidence from before the write, unstable reads, and startup without output.
 */
import { describe, expect, it } from 'vitest'
import { until } from '@conch/test-support/wait'
import { Config } from '../src/config.ts'
import type { ReadProbe, TerminalInspector } from '../src/inspector.ts'
import { createControlledPrompt } from '../src/prompt.ts'
import { UNCHECKED_PROMPT } from '../src/send-machine.ts'
import type { SendHost } from '../src/send.ts'
import { LocalSession, type LocalSessionOptions } from '../src/session.ts'
import type { TerminalExit, TerminalProcess } from '../src/terminal.ts'
import type { TermiosFlags } from '../src/termios.ts'

const SHELL = 4000
const CHILD = 4100
const prompt = createControlledPrompt()
const MARKER = (status = 0) => `\x1b]6973;${prompt.nonce};prompt;${status}\x07`
const PS1 = `${MARKER()}\x1b[?2004h$ `

class FakeTerminal implements TerminalProcess {
  readonly pid = SHELL - 1
  readonly slavePath = '/dev/pts/42'
  readonly slave = { dev: 26, rdev: 34858 }
  exited = false
  readonly writes: string[] = []
  readonly signals: string[] = []
  onSignal: ((signal: string) => void) | undefined
  onWrite: ((data: string) => void) | undefined
  private readonly data = new Set<(chunk: Buffer) => void>()
  private readonly exits = new Set<(exit: TerminalExit) => void>()
  private resolveExit!: (exit: TerminalExit) => void
  readonly exit = new Promise<TerminalExit>((resolve) => (this.resolveExit = resolve))

  /** Output the program wrote that the kernel has not moved to the master yet: only `readPending` gets it. */
  held = ''
  /** Output a program writes without end: every `readPending` finds more. */
  flood: string | undefined
  emit(text: string): void {
    for (const listener of [...this.data]) listener(Buffer.from(text))
  }
  readPending(): boolean {
    const text = this.held + (this.flood ?? '')
    this.held = ''
    if (text !== '') this.emit(text)
    return text !== ''
  }
  finish(exitCode: number): void {
    this.exited = true
    this.resolveExit({ exitCode, signal: undefined })
    for (const listener of [...this.exits]) listener({ exitCode, signal: undefined })
  }
  write(data: string): Promise<void> {
    this.writes.push(data)
    this.onWrite?.(data)
    return Promise.resolve()
  }
  resize(): void {}
  onData(listener: (chunk: Buffer) => void): () => void {
    this.data.add(listener)
    return () => this.data.delete(listener)
  }
  onExit(listener: (exit: TerminalExit) => void): () => void {
    this.exits.add(listener)
    return () => this.exits.delete(listener)
  }
}

/** A probe where task `tid` of group `pgid` is (or is not) blocked reading the terminal. */
function probe(pgid: number, tid: number, switches: number, reading = true): ReadProbe {
  return {
    verdict: reading ? 'reading' : 'not_reading',
    tpgid: pgid,
    tasks: [{ pid: tid, tid, name: 'prog', state: reading ? 'S' : 'R', syscall: reading ? 'read' : 'running', switches, fds: reading ? [0] : [], ...(reading ? { terminalFd: 0 } : {}) }],
    reader: reading ? { name: 'prog', pid: tid, tid, syscall: 'read', fd: 0, path: '/dev/pts/42' } : undefined,
    detail: reading ? `prog[${tid}] read fd0 /dev/pts/42` : 'not reading',
  }
}

class FakeInspector implements TerminalInspector {
  exact = true
  observable = true
  relayed = false
  foreground = SHELL
  current: ReadProbe = probe(SHELL, SHELL, 1)
  shellBlocked: boolean | undefined = true
  probes = 0
  /** How often the session asked for the foreground group, and whether the shell reads. */
  foregroundLooks = 0
  readLooks = 0
  async foregroundGroup() {
    this.foregroundLooks++
    return this.foreground
  }
  async probe() {
    this.probes++
    return this.current
  }
  async processName() {
    return 'prog'
  }
  async groupName() {
    return 'prog'
  }
  async taskSwitches(pid: number) {
    return this.current.tasks.find((task) => task.tid === pid)?.switches
  }
  async readBytes(pid: number, tid: number) {
    return this.current.tasks.find((task) => task.pid === pid && task.tid === tid)?.readBytes
  }
  async blockedInRead() {
    this.readLooks++
    return this.shellBlocked
  }
  wrapperStopped: boolean | undefined = true
  async stoppedWithoutChildren() {
    return this.wrapperStopped
  }
  /** The shell's jobs the kernel shows stopped. */
  stopped: { pgid: number; name: string; ageMs: number }[] = []
  async stoppedJobs() {
    return this.stopped
  }
  async executable() {
    return undefined
  }
}

const fast = { pollIntervalMs: 10, exactProbeAfterMs: 10, idleSilenceMs: 300, handoffGraceMs: 50, timeoutMs: 3000 }

async function started(overrides: Partial<Config> = {}, termios?: () => Promise<TermiosFlags | undefined>, options: Partial<LocalSessionOptions> = {}) {
  const terminal = new FakeTerminal()
  const inspector = new FakeInspector()
  const session = new LocalSession({
    ...options,
    cwd: '/',
    config: Config.parse({ ...fast, ...overrides }),
    prompt,
    terminal,
    inspector,
    ...(termios !== undefined && { termios }),
    teardown: async () => ({ stopped: [], survivors: [] }),
    signalWrapper: async (signal) => {
      terminal.signals.push(signal)
      terminal.onSignal?.(signal)
    },
  })
  const ready = session.ready(new AbortController().signal)
  terminal.emit(`welcome\r\n${PS1}`)
  const motd = await ready
  return { terminal, inspector, session, motd }
}

/** Resolves when the next write reaches the terminal. */
function nextWrite(terminal: FakeTerminal): Promise<string> {
  return new Promise((resolve) => {
    terminal.onWrite = (data) => {
      terminal.onWrite = undefined
      resolve(data)
    }
  })
}

describe('the controlled prompt tier', () => {
  it('publishes the startup output before the first prompt as the motd, and learns the shell group', async () => {
    const { motd, session } = await started()
    expect(motd).toBe('welcome')
    expect(session.shellPgid).toBe(SHELL)
  })

  it('settles on the prompt that follows the input, with its PS1 arriving in a later chunk than the marker', async () => {
    const { terminal, session } = await started()
    const operation = session.startSend({ text: 'echo hi', submit: true })
    // At the shell's own prompt a line goes with its Enter (readline reads it a key at a time).
    expect(await nextWrite(terminal)).toBe('echo hi\r')
    terminal.emit('echo hi')
    terminal.emit('\r\nhi\r\n')
    terminal.emit(MARKER())
    terminal.emit('\x1b[?2004h')
    terminal.emit('$ ')
    const result = await operation.done
    expect(result).toMatchObject({ waitReason: 'stdin_read', evidence: { tier: 'prompt' }, inputState: 'prompt' })
    expect(result.viewport).toBe('echo hi\nhi\n$ ')
  })

  it('does not take the old prompt followed by echoed input for readiness', async () => {
    const { terminal, inspector, session } = await started({ idleSilenceMs: 200 })
    inspector.current = probe(SHELL, SHELL, 1, false)
    const operation = session.startSend({ text: 'make', submit: true })
    await nextWrite(terminal)
    terminal.emit('make\r\n')
    const result = await operation.done
    expect(result.waitReason).toBe('inferred_idle')
  })

  it('waits for the shell to be in the foreground again before trusting its marker (the handoff race)', async () => {
    const { terminal, inspector, session } = await started()
    inspector.current = probe(CHILD, CHILD, 1, false)
    const operation = session.startSend({ text: 'sleep 1', submit: true })
    await nextWrite(terminal)
    inspector.foreground = CHILD
    terminal.emit(`sleep 1\r\n${PS1}`)
    let settled = false
    void operation.done.then(() => (settled = true))
    // The marker is on screen but the kernel still shows the child in front: the session looks
    // (at the marker, then at poll ticks) and does not settle.
    const looks = inspector.foregroundLooks
    await until(() => inspector.foregroundLooks >= looks + 3)
    expect(settled).toBe(false)
    inspector.foreground = SHELL
    const result = await operation.done
    expect(result).toMatchObject({ waitReason: 'stdin_read', evidence: { tier: 'prompt' } })
  })

  it('degrades to silence when a marker comes from a shell that is not in the foreground, and never hangs', async () => {
    const { terminal, inspector, session } = await started()
    inspector.current = probe(CHILD, CHILD, 1, false)
    const operation = session.startSend({ text: 'bash', submit: true })
    await nextWrite(terminal)
    inspector.foreground = CHILD
    terminal.emit(`bash\r\n${PS1}`)
    const result = await operation.done
    expect(result).toMatchObject({ waitReason: 'inferred_idle', evidence: { tier: 'silence', detail: 'no output for 350 ms' } })
  })

  it('does not settle on a prompt the shell owed from before while the input still waits in its queue', async () => {
    const { terminal, inspector, session } = await started({ idleSilenceMs: 200 })
    // A command that settled on silence leaves the shell busy; its prompt is still to come.
    inspector.foreground = CHILD
    inspector.current = probe(CHILD, CHILD, 1, false)
    const busy = session.startSend({ text: 'slow', submit: true })
    await nextWrite(terminal)
    terminal.emit('slow\r\n')
    expect((await busy.done).waitReason).toBe('inferred_idle')

    const next = session.startSend({ text: 'echo next', submit: true })
    await nextWrite(terminal)
    let settled = false
    void next.done.then(() => (settled = true))
    // `slow` ends: the shell prints the prompt it owed, then reads the typed-ahead input.
    inspector.foreground = SHELL
    inspector.shellBlocked = false
    const reads = inspector.readLooks
    terminal.emit(PS1)
    // The session asks whether the shell reads (it does not: the input is still queued), again.
    await until(() => inspector.readLooks >= reads + 3)
    expect(settled).toBe(false)
    inspector.shellBlocked = true
    terminal.emit(`echo next\r\nnext\r\n${PS1}`)
    const result = await next.done
    expect(result).toMatchObject({ waitReason: 'stdin_read', evidence: { tier: 'prompt' } })
    expect(result.viewport.split('\n')).toContain('next')
  })

  it('does not settle on a prompt the shell owed from before, parsed after the Enter was written, while the shell has not read the input', async () => {
    const queue: TermiosFlags = { canonical: false, echo: false, queued: 0 }
    const { terminal, inspector, session } = await started({ idleSilenceMs: 2000 }, async () => ({ ...queue }))
    // A command that settled on silence leaves the shell busy; its prompt is still to come.
    inspector.foreground = CHILD
    inspector.current = probe(CHILD, CHILD, 1, false)
    const busy = session.startSend({ text: 'slow', submit: true, idleMs: 100 })
    await nextWrite(terminal)
    terminal.emit('slow\r\n')
    expect((await busy.done).waitReason).toBe('inferred_idle')

    // `slow` ends: the shell prints the prompt it owed and blocks in its read — just as the next
    // send is written, and conch parses that prompt only after the Enter.
    inspector.foreground = SHELL
    inspector.current = probe(SHELL, SHELL, 2)
    inspector.shellBlocked = true
    const next = session.startSend({ text: 'echo next', submit: true })
    expect(await nextWrite(terminal)).toBe('echo next')
    expect(await nextWrite(terminal)).toBe('\r')
    let settled = false
    void next.done.then(() => (settled = true))
    // The input is still on its way to the shell (in the flip buffer, then its queue).
    queue.queued = 10
    const reads = inspector.readLooks
    terminal.emit(PS1)
    await until(() => settled || inspector.readLooks >= reads + 3)
    expect(settled).toBe(false)
    // The shell reads it, runs it, and prints its next prompt.
    queue.queued = 0
    terminal.emit(`echo next\r\nnext\r\n${PS1}`)
    const result = await next.done
    expect(result).toMatchObject({ waitReason: 'stdin_read', evidence: { tier: 'prompt' } })
    expect(result.viewport.split('\n')).toContain('next')
  })

  it('with the terminal\'s processes out of sight, a marker with the session\'s nonce settles unchecked and one without it does not', async () => {
    const { terminal, inspector, session } = await started({ idleSilenceMs: 200 })
    inspector.observable = false
    inspector.exact = false
    inspector.foreground = -1
    inspector.foregroundLooks = 0
    const real = session.startSend({ text: 'true', submit: true })
    expect(await nextWrite(terminal)).toBe('true\r')
    terminal.emit(`true\r\n${PS1}`)
    expect(await real.done).toMatchObject({ waitReason: 'stdin_read', evidence: { tier: 'prompt', detail: UNCHECKED_PROMPT } })
    const forged = session.startSend({ text: 'cat forged', submit: true })
    expect(await nextWrite(terminal)).toBe('cat forged\r')
    terminal.emit(`cat forged\r\n\x1b]6973;prompt;0\x07$ \x1b]6973;0000000000000000;prompt;0\x07$ `)
    expect(await forged.done).toMatchObject({ waitReason: 'inferred_idle', evidence: { tier: 'silence' } })
    expect(inspector.foregroundLooks).toBe(0)
  })
})

describe('the /proc tier', () => {
  it('ignores a wait that was there before the write until the reading task provably ran', async () => {
    const { terminal, inspector, session } = await started({ idleSilenceMs: 2000 })
    // A REPL in front, already blocked in its read before anything is written.
    inspector.foreground = CHILD
    inspector.current = probe(CHILD, CHILD, 7)
    const operation = session.startSend({ text: '1+1', submit: true })
    await nextWrite(terminal)
    let settled = false
    void operation.done.then(() => (settled = true))
    const probesAtWrite = inspector.probes
    await until(() => inspector.probes >= probesAtWrite + 3)
    expect(settled).toBe(false)
    // It wakes up, prints, and blocks in its read again: the counter moved.
    inspector.current = probe(CHILD, CHILD, 9)
    terminal.emit('1+1\r\n2\r\n>>> ')
    const result = await operation.done
    expect(result).toMatchObject({ waitReason: 'stdin_read', evidence: { tier: 'proc', detail: `prog[${CHILD}] read fd0 /dev/pts/42` }, inputState: 'prompt' })
    expect(result.viewport).toBe('1+1\n2\n>>> ')
  })

  it('takes in the output the reader wrote before blocking that is still in the flip buffer, before it settles', async () => {
    const { terminal, inspector, session } = await started({ idleSilenceMs: 2000 })
    const operation = session.startSend({ text: "printf 'c:%s' part; sleep 0.3; echo rest", submit: true })
    await nextWrite(terminal)
    // The command runs: `sleep` in front, nobody reading.
    inspector.foreground = CHILD
    inspector.current = probe(CHILD, CHILD, 1, false)
    terminal.emit("printf 'c:%s' part; sleep 0.3; echo rest\r\nc:part")
    // It ends: the shell prints the rest and its prompt and blocks in its read again, but the
    // kernel has not moved that output to the master yet — polling does not see it.
    terminal.held = `rest\r\n${PS1}`
    inspector.foreground = SHELL
    inspector.current = probe(SHELL, SHELL, 9)
    const result = await operation.done
    expect(result.waitReason).toBe('stdin_read')
    expect(result.viewport).toBe("printf 'c:%s' part; sleep 0.3; echo rest\nc:partrest\n$ ")
  })

  it('hands a proved read of the shell at its prompt to the prompt tier, whose status the result carries, while an earlier look is still out', async () => {
    const { terminal, inspector, session } = await started({ idleSilenceMs: 2000 })
    const python = session.startSend({ text: 'python3', submit: true })
    await nextWrite(terminal)
    inspector.foreground = CHILD
    inspector.current = probe(CHILD, CHILD, 1)
    terminal.emit('python3\r\n>>> ')
    expect(await python.done).toMatchObject({ waitReason: 'stdin_read', evidence: { tier: 'proc' } })

    // The shell's answers to "blocked in its read?" are held until the test lets them go: the
    // look asked when the prompt is parsed stays out while the /proc tier proves the read.
    let release!: () => void
    const held = new Promise<void>((resolve) => (release = resolve))
    const blockedInRead = inspector.blockedInRead.bind(inspector)
    inspector.blockedInRead = async () => {
      const blocked = await blockedInRead()
      await held
      return blocked
    }
    const exit = session.startSend({ text: 'exit(3)', submit: true })
    expect(await nextWrite(terminal)).toBe('exit(3)')
    terminal.emit('exit(3)')
    expect(await nextWrite(terminal)).toBe('\r')
    // Python exits 3; the shell prints its prompt, with that status, and blocks in its read.
    inspector.foreground = SHELL
    inspector.current = probe(SHELL, SHELL, 5)
    const looks = inspector.readLooks
    terminal.emit(`\r\n${MARKER(3)}\x1b[?2004h$ `)
    // Either the send settles without the prompt's answer, or a second look is asked.
    await Promise.race([exit.done, until(() => inspector.readLooks >= looks + 2)])
    release()
    const result = await exit.done
    expect(result).toMatchObject({ waitReason: 'stdin_read', exitStatus: 3 })
    expect(result.viewport).toBe('exit(3)\n$ ')
  })

  it('is not held by a program that writes without end once its reader is proved blocked: the send ends at its timeout', async () => {
    const { terminal, inspector, session } = await started({ idleSilenceMs: 2000, timeoutMs: 300 })
    inspector.foreground = CHILD
    inspector.current = probe(CHILD, CHILD, 7)
    const operation = session.startSend({ text: 'flood', submit: true })
    await nextWrite(terminal)
    terminal.flood = 'y\r\n'
    inspector.current = probe(CHILD, CHILD, 9)
    expect(await operation.done).toMatchObject({ waitReason: 'timeout' })
  })

  it('takes a different foreground group reading as new evidence', async () => {
    const { terminal, inspector, session } = await started({ idleSilenceMs: 2000 })
    inspector.current = probe(SHELL, SHELL, 3)
    const operation = session.startSend({ text: 'python3', submit: true })
    await nextWrite(terminal)
    inspector.foreground = CHILD
    inspector.current = probe(CHILD, CHILD, 1)
    terminal.emit('python3\r\n>>> ')
    expect(await operation.done).toMatchObject({ waitReason: 'stdin_read', evidence: { tier: 'proc' } })
  })

  it('rejects a read that does not hold for the confirmation gap (a program passing through a read on its way out)', async () => {
    const { terminal, inspector, session } = await started({ idleSilenceMs: 400 })
    inspector.foreground = CHILD
    inspector.current = probe(CHILD, CHILD, 1)
    const operation = session.startSend({ text: '.exit', submit: true })
    await nextWrite(terminal)
    // Every probe sees the task reading, but it keeps running in between (the counter moves).
    let switches = 2
    inspector.probe = async () => {
      inspector.probes++
      return probe(CHILD, CHILD, switches++)
    }
    terminal.emit('.exit\r\n')
    const result = await operation.done
    expect(result.waitReason).toBe('inferred_idle')
  })

  it('on a relayed terminal, waits for the output the reader wrote before it blocked, still in the relay, behind a sync', async () => {
    // What the far terminal's programs wrote and the relay has not carried yet: it arrives in
    // order, before the sync written behind it.
    let inTransit = ''
    const far: string[] = []
    const { terminal, inspector, session } = await started({ idleSilenceMs: 2000 }, undefined, {
      writeFarOutput: async (bytes) => {
        far.push(bytes)
        const carried = inTransit + bytes
        inTransit = ''
        setImmediate(() => terminal.emit(carried))
        return true
      },
    })
    const reading = (switches: number, readBytes: number): ReadProbe => {
      const base = probe(CHILD, CHILD, switches)
      return { ...base, tasks: base.tasks.map((task) => ({ ...task, readBytes })) }
    }
    inspector.relayed = true
    inspector.foreground = CHILD
    inspector.current = reading(7, 100)
    const operation = session.startSend({ text: 'print 6*7\r', submit: false })
    await nextWrite(terminal)
    // The reader read the line, answered and blocked in its read again; its echo is here, its answer in the relay.
    terminal.emit('print 6*7\r\n')
    inTransit = '$1 = 42\r\n(gdb) '
    inspector.current = reading(9, 110)
    const result = await operation.done
    expect(result).toMatchObject({ waitReason: 'stdin_read', evidence: { tier: 'proc' } })
    expect(result.viewport).toBe('print 6*7\n$1 = 42\n(gdb) ')
    expect(far).toHaveLength(1)
    expect(far[0]).toMatch(/^\x1b\]6973;sync;[0-9a-f]{32}\x07$/)
  })

  it('on a relayed terminal, a sync that comes back alone is not output: the shell stays known at its prompt, no send sees it', async () => {
    const far: string[] = []
    let outputs = 0
    const { terminal, inspector, session } = await started({ idleSilenceMs: 2000 }, undefined, {
      writeFarOutput: async (bytes) => {
        far.push(bytes)
        setImmediate(() => terminal.emit(bytes))
        return true
      },
    })
    inspector.relayed = true
    session.onChange(() => outputs++)
    const host = (session as unknown as { host: SendHost }).host
    expect(host.knownAtPrompt).toBe(true)
    await host.relaySync!()
    expect(far).toHaveLength(1)
    // Output would have ended the prompt (and driven a send's tiers again: a new proof, a new sync).
    expect(host.knownAtPrompt).toBe(true)
    expect(outputs).toBe(0)
  })

  it('on a relayed terminal, a sync that never comes back (the relay holds its output) ends at idleSilenceMs, not never', async () => {
    const { terminal, inspector, session } = await started({ idleSilenceMs: 300 }, undefined, { writeFarOutput: async () => true })
    inspector.relayed = true
    inspector.foreground = CHILD
    inspector.current = { ...probe(CHILD, CHILD, 7), tasks: probe(CHILD, CHILD, 7).tasks.map((task) => ({ ...task, readBytes: 0 })) }
    const operation = session.startSend({ text: 'x\r', submit: false })
    await nextWrite(terminal)
    terminal.emit('x\r\n')
    inspector.current = { ...probe(CHILD, CHILD, 8), tasks: probe(CHILD, CHILD, 8).tasks.map((task) => ({ ...task, readBytes: 2 })) }
    expect(await operation.done).toMatchObject({ waitReason: 'stdin_read', viewport: 'x' })
  })

  it('never settles stdin_read on unknown or not_reading probes', async () => {
    const { terminal, inspector, session } = await started({ idleSilenceMs: 200 })
    inspector.foreground = CHILD
    inspector.current = { ...probe(CHILD, CHILD, 1, false), verdict: 'unknown' }
    const operation = session.startSend({ text: 'work', submit: true })
    await nextWrite(terminal)
    inspector.current = probe(CHILD, CHILD, 5, false)
    terminal.emit('work\r\n')
    expect((await operation.done).waitReason).toBe('inferred_idle')
  })

  it('reports a continuation for `... ` and for bash PS2 `> ` only when the shell itself reads', async () => {
    const { terminal, inspector, session } = await started({ idleSilenceMs: 2000 })
    inspector.current = probe(SHELL, SHELL, 3)
    const quote = session.startSend({ text: 'echo "abc', submit: true })
    await nextWrite(terminal)
    inspector.current = probe(SHELL, SHELL, 4)
    terminal.emit('echo "abc\r\n> ')
    expect(await quote.done).toMatchObject({ waitReason: 'stdin_read', inputState: 'continuation' })

    terminal.emit('\r\n')
    const node = session.startSend({ text: 'node', submit: true })
    await nextWrite(terminal)
    inspector.foreground = CHILD
    inspector.current = probe(CHILD, CHILD, 1)
    terminal.emit('node\r\n> ')
    expect(await node.done).toMatchObject({ waitReason: 'stdin_read', inputState: 'prompt' })
  })
})

describe('Enter after the text was consumed', () => {
  /** A terminal whose termios answers are set by the test, counting the looks. */
  function queue(flags: TermiosFlags) {
    const state = { flags, looks: 0 }
    return { state, read: async () => (state.looks++, { ...state.flags }) }
  }

  it('writes Enter once the raw-mode input queue is empty, although the reader never blocked again and echoed nothing', async () => {
    const terminal = queue({ canonical: false, echo: false, queued: 3 })
    const { terminal: pty, inspector, session } = await started({ idleSilenceMs: 2000, submitWaitMs: 20000 }, terminal.read)
    // A REPL in front, blocked in its read before the write; after it, it stays busy (the Node
    // REPL renders a preview before it waits again): its counter never moves.
    inspector.foreground = CHILD
    inspector.current = probe(CHILD, CHILD, 7)
    // The REPL's prompt: the shell is no longer at its own.
    pty.emit('> ')
    const operation = session.startSend({ text: '1+1', submit: true })
    expect(await nextWrite(pty)).toBe('1+1')
    const enter = nextWrite(pty)
    let entered = false
    void enter.then(() => (entered = true))
    // Still in the queue: looked at, and at again, but no Enter.
    await until(() => terminal.state.looks >= 6)
    expect(entered).toBe(false)
    // The reader read it: the queue is empty, nothing else changed. The next look writes Enter
    // (not the bound, 20 s away).
    terminal.state.flags = { canonical: false, echo: false, queued: 0 }
    const looks = terminal.state.looks
    await until(() => entered || terminal.state.looks > looks + 3)
    expect(entered).toBe(true)
    expect(await enter).toBe('\r')
    expect(pty.writes.slice(-2)).toEqual(['1+1', '\r'])
    inspector.current = probe(CHILD, CHILD, 9)
    pty.emit('1+1\r\n2\r\n> ')
    expect(await operation.done).toMatchObject({ waitReason: 'stdin_read', evidence: { tier: 'proc' } })
  })

  it('in canonical mode an empty queue alone is no proof (an unfinished line is not counted): Enter waits for the echo', async () => {
    const terminal = queue({ canonical: true, echo: true, queued: 0 })
    const { terminal: pty, inspector, session } = await started({ idleSilenceMs: 2000, submitWaitMs: 20000 }, terminal.read)
    inspector.foreground = CHILD
    inspector.current = probe(CHILD, CHILD, 7)
    // The REPL's prompt: the shell is no longer at its own.
    pty.emit('> ')
    const operation = session.startSend({ text: 'abc', submit: true })
    expect(await nextWrite(pty)).toBe('abc')
    const enter = nextWrite(pty)
    let entered = false
    void enter.then(() => (entered = true))
    await until(() => terminal.state.looks >= 6)
    expect(entered).toBe(false)
    // The kernel's echo of the line so far.
    pty.emit('abc')
    expect(await enter).toBe('\r')
    inspector.current = probe(CHILD, CHILD, 9)
    pty.emit('\r\nabc\r\n? ')
    await operation.done
  })
})

describe('silence, timeout and exit', () => {
  it('settles timeout when output never pauses long enough', async () => {
    const { terminal, inspector, session } = await started({ idleSilenceMs: 200, timeoutMs: 500 })
    inspector.foreground = CHILD
    inspector.current = probe(CHILD, CHILD, 1, false)
    const operation = session.startSend({ text: 'yes', submit: true })
    await nextWrite(terminal)
    const ticker = setInterval(() => terminal.emit('y\r\n'), 20)
    try {
      const result = await operation.done
      expect(result).toMatchObject({ waitReason: 'timeout', sessionStatus: { state: 'running' }, evidence: { tier: 'timeout' } })
    } finally {
      clearInterval(ticker)
    }
  })

  it('reports the exit after the output before the exit marker, with the wrapper’s real status, once the kernel shows the wrapper stopped', async () => {
    const { terminal, session } = await started()
    terminal.onSignal = (signal) => signal === 'SIGCONT' && terminal.finish(3)
    const operation = session.startSend({ text: 'exit 3', submit: true })
    await nextWrite(terminal)
    terminal.emit(`exit 3\r\nlast words\r\nexit\r\n\x1b]6973;${prompt.nonce};exit;3\x07`)
    const result = await operation.done
    expect(result).toMatchObject({ waitReason: 'session_exit', sessionStatus: { state: 'exited', exitCode: 3, signal: null } })
    expect(result.viewport).toContain('last words')
    expect(terminal.signals).toEqual([...prompt.exitAcknowledgement])
    expect(() => session.startSend({ text: 'x', submit: true })).toThrowError(expect.objectContaining({ code: 'SESSION_EXITED' }))
  })

  it('ignores an exit marker while the wrapper is not stopped: no acknowledgement, the session lives', async () => {
    const { terminal, inspector, session } = await started({ idleSilenceMs: 200 })
    inspector.wrapperStopped = false
    const operation = session.startSend({ text: 'forge', submit: true })
    await nextWrite(terminal)
    terminal.emit(`forge\r\n\x1b]6973;${prompt.nonce};exit;42\x07`)
    const result = await operation.done
    expect(result).toMatchObject({ waitReason: 'inferred_idle', sessionStatus: { state: 'running' } })
    expect(terminal.signals).toEqual([])
  })

  it('a prompt marker while the shell is not blocked reading the terminal does not settle on the prompt', async () => {
    const { terminal, inspector, session } = await started({ idleSilenceMs: 200 })
    inspector.shellBlocked = false
    const operation = session.startSend({ text: 'cat forged', submit: true })
    await nextWrite(terminal)
    terminal.emit(`cat forged\r\n${MARKER()}$ `)
    expect((await operation.done).waitReason).toBe('inferred_idle')
  })
})

describe('startup', () => {
  it('never publishes a terminal that printed nothing on silence; the timeout rejects it', async () => {
    const terminal = new FakeTerminal()
    const inspector = new FakeInspector()
    inspector.current = probe(SHELL, SHELL, 1)
    const session = new LocalSession({
      cwd: '/',
      config: Config.parse({ ...fast, idleSilenceMs: 50, timeoutMs: 400 }),
      prompt,
      terminal,
      inspector,
      teardown: async () => ({ stopped: [], survivors: [] }),
      signalWrapper: async () => {},
    })
    await expect(session.ready(new AbortController().signal)).rejects.toMatchObject({ code: 'SPAWN_FAILED' })
  })

  it('rejects with the caller’s exact abort reason', async () => {
    const terminal = new FakeTerminal()
    const session = new LocalSession({
      cwd: '/',
      config: Config.parse(fast),
      prompt,
      terminal,
      inspector: new FakeInspector(),
      teardown: async () => ({ stopped: [], survivors: [] }),
      signalWrapper: async () => {},
    })
    const controller = new AbortController()
    const ready = session.ready(controller.signal)
    const reason = { why: 'gone' }
    controller.abort(reason)
    await expect(ready).rejects.toBe(reason)
  })
})

describe('process names', () => {
  it('a close names processes the teardown stopped or left by the secret they carry, whole or cut', async () => {
    const terminal = new FakeTerminal()
    const session = new LocalSession({
      cwd: '/',
      config: Config.parse(fast),
      prompt,
      terminal,
      inspector: new FakeInspector(),
      redact: [{ name: 'DEMO', value: 'hunter2-S3cretValue' }],
      teardown: async () => ({
        stopped: [{ pid: 11, startTime: '1', comm: 'hunter2-S3cr' }, { pid: 12, startTime: '1', comm: 'bash' }],
        survivors: [{ pid: 13, startTime: '1', comm: 'etValue' }, { pid: 14, startTime: '1', comm: 'Value' }],
      }),
      signalWrapper: async () => {},
    })
    const ready = session.ready(new AbortController().signal)
    terminal.emit(`welcome\r\n${PS1}`)
    await ready
    const closed = await session.close()
    expect(closed.stopped).toEqual([{ pid: 11, name: '[secret DEMO]' }, { pid: 12, name: 'bash' }])
    // Five characters are below the piece the rule recognises (PROCESS_PIECE_CHARS).
    expect(closed.survivors).toEqual([{ pid: 13, name: '[secret DEMO]' }, { pid: 14, name: 'Value' }])
  })
})
