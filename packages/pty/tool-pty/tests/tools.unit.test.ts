import { afterEach, describe, expect, it } from 'vitest'
import { until } from '@conch/test-support/wait'
import { boot, type Harness } from './harness.ts'

let harness: Harness

afterEach(async () => {
  const current = harness as Harness | undefined
  harness = undefined as never
  await current?.dispose()
})

async function opened(options: Parameters<typeof boot>[0] = {}): Promise<Harness> {
  harness = await boot(options)
  await harness.call('terminal_open', { type: 'shell' })
  return harness
}

describe('tool definitions', () => {
  it('registers seven tools with their ACP kinds', async () => {
    harness = await boot()
    const specs = harness.ctx.tools.specs().filter((spec) => spec.name.startsWith('terminal_'))
    expect(specs.map((spec) => [spec.name, spec.kind])).toEqual([
      ['terminal_close', 'delete'],
      ['terminal_list', 'read'],
      ['terminal_open', 'execute'],
      ['terminal_read', 'read'],
      ['terminal_resize', 'execute'],
      ['terminal_send', 'execute'],
      ['terminal_signal', 'execute'],
    ])
  })

  it('offers the documented parameters', async () => {
    harness = await boot()
    const parameters = Object.fromEntries(harness.ctx.tools.specs().map((spec) => [spec.name, spec.parameters]))
    expect(Object.keys(parameters['terminal_open']!['properties'] as object)).toEqual(['type', 'name', 'cwd', 'rows', 'cols', 'expose'])
    expect(parameters['terminal_open']!['required']).toEqual(['type'])
    expect(Object.keys(parameters['terminal_send']!['properties'] as object)).toEqual(['sessionId', 'text', 'keys', 'secret', 'submit', 'timeoutMs', 'idleMs', 'maxOutputBytes', 'run_in_background', 'notify', 'notifyOn'])
    // One of text, keys or secret: checked when called (see the send tests). No sessionId: the agent's shell.
    for (const name of ['terminal_send', 'terminal_read', 'terminal_signal', 'terminal_close']) expect(parameters[name]!['required'] ?? [], name).not.toContain('sessionId')
    expect(Object.keys(parameters['terminal_read']!['properties'] as object)).toEqual(['sessionId', 'offset', 'count', 'screen', 'maxOutputBytes'])
    expect(parameters['terminal_resize']!['required']).toEqual(['rows', 'cols'])
    expect((parameters['terminal_signal']!['properties'] as Record<string, { enum?: string[] }>)['signal']!.enum).toEqual(['SIGINT', 'SIGTERM', 'SIGKILL', 'SIGTSTP', 'SIGHUP'])
    expect(parameters['terminal_list']!['properties']).toEqual({})
  })

  it('removes run_in_background from the schema when it is disabled, and refuses it if forced', async () => {
    harness = await boot({ toolPty: { enableRunInBackground: false } })
    await harness.call('terminal_open', { type: 'shell' })
    const send = harness.ctx.tools.specs().find((spec) => spec.name === 'terminal_send')!
    expect(Object.keys(send.parameters['properties'] as object)).toEqual(['sessionId', 'text', 'keys', 'secret', 'submit', 'timeoutMs', 'idleMs', 'maxOutputBytes'])
    const forced = await harness.call('terminal_send', { sessionId: 'pty-1', text: 'export WRITTEN=yes', run_in_background: true })
    expect(forced.isError).toBe(true)
    expect(forced.content[0]!.text).toContain('run_in_background is disabled in this deployment; send in the foreground')
    expect(await harness.text('terminal_send', { sessionId: 'pty-1', text: 'echo "[$WRITTEN]"' })).toMatch(/^\[\]\n/)
  })

  it('titles each call for clients', async () => {
    harness = await boot()
    const title = (name: string, input: unknown) => harness.ctx.tools.get(name)!.title!(input)
    expect(title('terminal_open', { type: 'shell', name: 'build' })).toBe('open shell "build"')
    expect(title('terminal_send', { sessionId: 'pty-1', text: 'make test\nmake lint', submit: true })).toBe('pty-1: make test')
    expect(title('terminal_send', { sessionId: 'pty-1', text: '\x03', submit: false })).toBe('pty-1: ^C')
    expect(title('terminal_send', { sessionId: 'pty-1', text: '', submit: true })).toBe('pty-1: (empty line)')
    expect(title('terminal_send', { sessionId: 'pty-1', text: 'x'.repeat(100), submit: true })).toBe(`pty-1: ${'x'.repeat(79)}…`)
    expect(title('terminal_read', { sessionId: 'pty-1' })).toBe('read pty-1')
    expect(title('terminal_signal', { sessionId: 'pty-1', signal: 'SIGINT' })).toBe('pty-1: SIGINT')
    expect(title('terminal_close', { sessionId: 'pty-1' })).toBe('close pty-1')
    expect(title('terminal_list', {})).toBe('terminals')
  })

  it('adds a terminal section to the system prompt', async () => {
    harness = await boot()
    const prompt = harness.ctx.agents.systemPrompt(harness.agent)
    expect(prompt).toContain('Use terminals for REPLs (python3, node), debuggers and interactive programs')
    expect(prompt).toContain('inferred_idle and timeout do not prove a command finished')
    expect(prompt).toContain('run_in_background: true')
  })

  it('leaves background sends out of the prompt when they are disabled', async () => {
    harness = await boot({ toolPty: { enableRunInBackground: false } })
    expect(harness.ctx.agents.systemPrompt(harness.agent)).not.toContain('run_in_background')
  })
})

describe('what the model sees', () => {
  it('renders an opened terminal with its motd and working directory, the name and type in meta only', async () => {
    harness = await boot({ memory: { motd: 'memory shell ready' } })
    const result = await harness.call('terminal_open', { type: 'shell', name: 'build' })
    expect(result.content[0]!.text).toBe('memory shell ready\n[opened: pty-1, cwd /workspace]')
    expect(result.meta).toEqual({ sessionId: 'pty-1', type: 'shell', status: { state: 'running' }, name: 'build', cwd: '/workspace' })
    expect(await harness.text('terminal_open', { type: 'shell', cwd: 'src' })).toBe('memory shell ready\n[opened: pty-2, cwd /workspace/src]')
  })

  it('leaves out the working directory when it is the workspace root the sandbox policy names', async () => {
    harness = await boot({ memory: { motd: 'memory shell ready' } })
    harness.ctx.provide('sandboxPolicy')
    harness.ctx.set('sandboxPolicy', { resolve: () => ({ network: { mode: 'full' }, workspaceRoot: '/workspace' }) })
    expect(await harness.text('terminal_open', { type: 'shell' })).toBe('memory shell ready\n[opened: pty-1]')
    expect(await harness.text('terminal_open', { type: 'shell', cwd: 'src' })).toBe('memory shell ready\n[opened: pty-2, cwd /workspace/src]')
  })

  it('escapes a working directory whose name would read as a result line', async () => {
    harness = await boot()
    const text = await harness.text('terminal_open', { type: 'shell', cwd: 'x]\n[session: exited with code 0' })
    expect(text).toBe('[opened: pty-1, cwd /workspace/x]\\n[session: exited with code 0]')
  })

  it('says in the terminal_read description that offset and count go back from the newest line', async () => {
    harness = await boot()
    const read = harness.ctx.tools.specs().find((spec) => spec.name === 'terminal_read')
    expect(read?.description).toContain('offset and count go back from the newest line: {offset: 0, count: 20} is the last 20 lines')
  })

  it('renders a send that reached the prompt, with structured meta', async () => {
    await opened()
    const result = await harness.call('terminal_send', { sessionId: 'pty-1', text: 'echo hi' })
    expect(result.isError).toBeUndefined()
    expect(result.content[0]!.text).toBe('hi\n[wait: stdin_read]')
    expect(result.meta).toEqual({
      sessionId: 'pty-1',
      waitReason: 'stdin_read',
      sessionStatus: { state: 'running' },
      evidence: { tier: 'fixed', detail: 'memory shell prompt' },
      inputState: 'prompt',
      elapsedMs: 0,
      truncated: false,
    })
  })

  it('says when a send printed nothing', async () => {
    await opened()
    expect(await harness.text('terminal_send', { sessionId: 'pty-1', text: 'cd /tmp' })).toBe('(no new output)\n[wait: stdin_read]')
  })

  it('keeps shell state between sends', async () => {
    await opened()
    await harness.call('terminal_send', { sessionId: 'pty-1', text: 'cd /srv && export NAME=conch' })
    expect(await harness.text('terminal_send', { sessionId: 'pty-1', text: 'pwd; echo $NAME' })).toBe('/srv\nconch\n[wait: stdin_read]')
  })

  it('makes a continuation visible and says how to finish or abandon it', async () => {
    await opened()
    expect(await harness.text('terminal_send', { sessionId: 'pty-1', text: 'echo "abc' })).toBe(
      '(no new output)\n[wait: stdin_read]\n' +
        '[input: continuation — the terminal is waiting for the rest of a block or quoted line; send the rest (often an empty line) to finish it, or SIGINT to abandon it]',
    )
    expect(await harness.text('terminal_send', { sessionId: 'pty-1', text: 'def"' })).toBe('abc\ndef\n[wait: stdin_read]')
  })

  it('says when the output only went quiet and the input was not read', async () => {
    await opened()
    const result = await harness.call('terminal_send', { sessionId: 'pty-1', text: 'sleep 100' })
    expect(result.content[0]!.text).toBe(
      '(no new output)\n[wait: inferred_idle]\n' +
        '[input: not_reading — the foreground program was not reading the terminal; the text is typed ahead and may run when that program ends]\n' +
        '[note: output went quiet, which does not prove the command finished; to keep waiting send {"text":"","submit":false,"idleMs":N}; terminal_signal SIGINT interrupts it]',
    )
    expect(result.meta).toMatchObject({ waitReason: 'inferred_idle', inputState: 'not_reading', elapsedMs: 3000 })
  })

  it('says when a send timed out while the command kept running', async () => {
    await opened({ memory: { yesLines: 2 } })
    expect(await harness.text('terminal_send', { sessionId: 'pty-1', text: 'yes' })).toBe(
      'y\ny\n[wait: timeout]\n' +
        '[input: not_reading — the foreground program was not reading the terminal; the text is typed ahead and may run when that program ends]\n' +
        '[note: the command is still running; terminal_read shows later output, terminal_signal SIGINT interrupts it; send with a larger timeoutMs or run_in_background to wait longer]',
    )
  })

  it('takes a send’s own timeoutMs, capped by maxTimeoutMs', async () => {
    await opened({ memory: { yesLines: 2 }, toolPty: { maxTimeoutMs: 60000 } })
    const timed = await harness.call('terminal_send', { sessionId: 'pty-1', text: 'yes', timeoutMs: 1234 })
    expect(timed.meta).toMatchObject({ waitReason: 'timeout', elapsedMs: 1234 })
    await harness.call('terminal_signal', { sessionId: 'pty-1', signal: 'SIGINT' })
    const refused = await harness.call('terminal_send', { sessionId: 'pty-1', text: 'echo x', timeoutMs: 60001 })
    expect(refused.isError).toBe(true)
    expect(refused.content[0]!.text).toContain('timeoutMs may be at most 60000 (maxTimeoutMs); use run_in_background for longer commands')
    const quiet = await harness.call('terminal_send', { sessionId: 'pty-1', text: 'sleep 100', idleMs: 4321 })
    expect(quiet.meta).toMatchObject({ waitReason: 'inferred_idle', elapsedMs: 4321 })
  })

  it('renders a send that ended the shell with its exit code', async () => {
    await opened()
    expect(await harness.text('terminal_send', { sessionId: 'pty-1', text: 'echo bye; exit 3' })).toBe('bye\nexit\n[wait: session_exit]\n[session: exited code=3]')
  })

  it('refuses a send to an exited terminal but still reads and lists it', async () => {
    await opened()
    await harness.call('terminal_send', { sessionId: 'pty-1', text: 'exit 4' })
    const refused = await harness.call('terminal_send', { sessionId: 'pty-1', text: 'echo x' })
    expect(refused.isError).toBe(true)
    expect(refused.content[0]!.text).toMatch(/^SESSION_EXITED: PTY session pty-1 exited with code 4; nothing was written/)
    const signalled = await harness.call('terminal_signal', { sessionId: 'pty-1', signal: 'SIGINT' })
    expect(signalled.content[0]!.text).toMatch(/^SESSION_EXITED: .*no signal was sent/)
    expect(await harness.text('terminal_read', { sessionId: 'pty-1' })).toBe('$ exit 4\nexit\n[lines: 1-2 of 2]')
    expect(await harness.text('terminal_list', {})).toBe('pty-1 shell exited code=4')
  })

  it('reads scrollback pages with line numbers and a pointer to older lines', async () => {
    await opened()
    await harness.call('terminal_send', { sessionId: 'pty-1', text: 'seq 5' })
    expect(await harness.text('terminal_read', { sessionId: 'pty-1' })).toBe('$ seq 5\n1\n2\n3\n4\n5\n[lines: 1-6 of 6]')
    expect(await harness.text('terminal_read', { sessionId: 'pty-1', offset: 1, count: 2 })).toBe(
      '3\n4\n[lines: 4-5 of 6]\n[older: terminal_read with offset=3 shows the lines before 4]',
    )
    expect(await harness.text('terminal_read', { sessionId: 'pty-1', offset: 10 })).toBe('(no lines)\n[lines: none of 6]')
  })

  it('says when older scrollback was dropped', async () => {
    await opened({ memory: { scrollbackLines: 3 } })
    await harness.call('terminal_send', { sessionId: 'pty-1', text: 'seq 10' })
    expect(await harness.text('terminal_read', { sessionId: 'pty-1', count: 5 })).toBe(
      '8\n9\n10\n[lines: 9-11 of 11]\n[dropped: 2 lines asked for (7-8) no longer retained; retained: 9-11]',
    )
    // A page that reaches back to the oldest retained line says older ones are gone; a newer page points to older lines instead.
    expect(await harness.text('terminal_read', { sessionId: 'pty-1', count: 3 })).toBe('8\n9\n10\n[lines: 9-11 of 11]\n[dropped: lines before 9 are no longer retained]')
    expect(await harness.text('terminal_read', { sessionId: 'pty-1', count: 2 })).toBe('9\n10\n[lines: 10-11 of 11]\n[older: terminal_read with offset=2 shows the lines before 10]')
  })

  it('renders a delivered signal with its target', async () => {
    await opened()
    await harness.call('terminal_send', { sessionId: 'pty-1', text: 'sleep 100' })
    const result = await harness.call('terminal_signal', { sessionId: 'pty-1', signal: 'SIGINT' })
    expect(result.content[0]!.text).toBe('[signal: SIGINT delivered to sleep in pty-1]')
    expect(result.meta).toEqual({ sessionId: 'pty-1', signal: 'SIGINT', delivered: true, targetPgid: 101, target: 'sleep' })
    expect(await harness.text('terminal_send', { sessionId: 'pty-1', text: 'echo $?' })).toBe('130\n[wait: stdin_read]')
  })

  it('refuses SIGKILL to the shell and points to terminal_close', async () => {
    await opened()
    const result = await harness.call('terminal_signal', { sessionId: 'pty-1', signal: 'SIGKILL' })
    expect(result.isError).toBe(true)
    expect(result.content[0]!.text).toBe(
      'SIGNAL_REFUSED: SIGKILL would kill the shell itself (it is the foreground process group); close the session instead — terminal_close ends the session and everything in it',
    )
    expect(result.meta).toEqual({ errorCode: 'SIGNAL_REFUSED' })
  })

  it('renders a close with what it stopped, and forgets the terminal', async () => {
    await opened()
    await harness.call('terminal_send', { sessionId: 'pty-1', text: 'sleep 100' })
    expect(await harness.text('terminal_close', { sessionId: 'pty-1' })).toBe('[closed: pty-1 — stopped 2 processes: sleep, bash]\n[session: exited signal=SIGHUP]')
    expect(await harness.text('terminal_list', {})).toBe('(no terminals; terminal_open starts one)')
  })

  it('lists terminals in creation order with status, name and busy', async () => {
    harness = await boot()
    await harness.call('terminal_open', { type: 'shell', name: 'build' })
    await harness.call('terminal_open', { type: 'shell' })
    await harness.call('terminal_send', { sessionId: 'pty-1', text: 'exit 2' })
    const held = harness.call('terminal_send', { sessionId: 'pty-2', text: 'hold' })
    await new Promise((resolve) => setImmediate(resolve))
    const listed = await harness.call('terminal_list', {})
    expect(listed.content[0]!.text).toBe('pty-1 shell exited code=2 name=build\npty-2 shell running busy')
    expect(listed.meta).toEqual({
      sessions: [
        { sessionId: 'pty-1', name: 'build', type: 'shell', status: { state: 'exited', exitCode: 2, signal: null }, busy: false },
        { sessionId: 'pty-2', type: 'shell', status: { state: 'running' }, busy: true },
      ],
    })
    await harness.call('terminal_signal', { sessionId: 'pty-2', signal: 'SIGINT' })
    await held
  })

  it('streams a foreground send’s output as progress while it runs', async () => {
    await opened()
    const updates: unknown[] = []
    const text = await harness.text('terminal_send', { sessionId: 'pty-1', text: 'seq 2; echo done' }, { progress: (update) => updates.push(update) })
    expect(updates).toEqual([
      { type: 'output', text: '1\n2\n' },
      { type: 'output', text: 'done\n' },
    ])
    expect(text).toBe('1\n2\ndone\n[wait: stdin_read]')
  })

  it('interrupts a foreground send with SIGINT when the turn is cancelled', async () => {
    await opened()
    const turn = new AbortController()
    const updates: string[] = []
    const pending = harness.call('terminal_send', { sessionId: 'pty-1', text: 'hold compiling' }, { signal: turn.signal, progress: (update) => updates.push(update.text) })
    await until(() => updates.length > 0, 10_000, 'the first progress update')
    expect(updates).toEqual(['compiling\n'])
    turn.abort()
    const result = await pending
    expect(result.content[0]!.text).toBe('compiling\n[wait: stdin_read]\n[interrupted: the turn was cancelled, so SIGINT was sent to the foreground]')
    expect(result.meta).toMatchObject({ evidence: { detail: 'interrupted with SIGINT; memory shell prompt' } })
    expect(await harness.text('terminal_send', { sessionId: 'pty-1', text: 'echo $?' })).toMatch(/^130\n/)
  })

  it('refuses a second send while one is running, writing nothing', async () => {
    await opened()
    const held = harness.call('terminal_send', { sessionId: 'pty-1', text: 'hold' })
    await new Promise((resolve) => setImmediate(resolve))
    const refused = await harness.call('terminal_send', { sessionId: 'pty-1', text: 'export WRITTEN=yes' })
    expect(refused.isError).toBe(true)
    expect(refused.content[0]!.text).toBe(
      'SEND_ACTIVE: PTY session pty-1 is still running a send; wait for it with task_output or interrupt it with terminal_signal SIGINT, then send again',
    )
    await harness.call('terminal_signal', { sessionId: 'pty-1', signal: 'SIGINT' })
    await held
    expect(await harness.text('terminal_send', { sessionId: 'pty-1', text: 'echo "[$WRITTEN]"' })).toMatch(/^\[\]\n/)
  })
})

describe('bad input', () => {
  it('names an unknown terminal and how to find the right one, in every tool', async () => {
    await opened()
    const hint = 'unknown PTY session pty-9 — terminal_list shows your terminals; terminal_open starts a new one'
    for (const [name, input] of [
      ['terminal_send', { sessionId: 'pty-9', text: 'ls' }],
      ['terminal_read', { sessionId: 'pty-9' }],
      ['terminal_signal', { sessionId: 'pty-9', signal: 'SIGINT' }],
      ['terminal_close', { sessionId: 'pty-9' }],
    ] as const) {
      const result = await harness.call(name, input)
      expect(result.isError).toBe(true)
      expect(result.content[0]!.text).toBe(`NO_SESSION: ${hint}`)
      expect(result.meta).toEqual({ errorCode: 'NO_SESSION' })
    }
  })

  it('keeps another agent out of every tool and shows it none of the terminals', async () => {
    await opened()
    const other = { agent: harness.other }
    for (const [name, input] of [
      ['terminal_send', { sessionId: 'pty-1', text: 'export STOLEN=yes' }],
      ['terminal_send', { sessionId: 'pty-1', text: 'export STOLEN=yes', run_in_background: true }],
      ['terminal_read', { sessionId: 'pty-1' }],
      ['terminal_signal', { sessionId: 'pty-1', signal: 'SIGHUP' }],
      ['terminal_close', { sessionId: 'pty-1' }],
    ] as const) {
      const result = await harness.call(name, input, other)
      expect(result.isError).toBe(true)
      expect(result.content[0]!.text).toBe(
        'FOREIGN_SESSION: PTY session pty-1 belongs to another agent — use a terminal you opened (terminal_list), or open one with terminal_open',
      )
    }
    expect(await harness.text('terminal_list', {}, other)).toBe('(no terminals; terminal_open starts one)')
    expect(await harness.text('task_list', {}, other)).toBe('(no tasks)')
    expect(await harness.text('terminal_send', { sessionId: 'pty-1', text: 'echo "[$STOLEN]"' })).toBe('[]\n[wait: stdin_read]')
  })

  it('reports wrong types, an empty type and a signal outside the set with the field and the fix', async () => {
    await opened()
    expect(await harness.text('terminal_send', { sessionId: 1, text: 'ls' })).toBe(
      'invalid arguments for terminal_send:\n- sessionId: Invalid input: expected string, received number\nFix the arguments and call terminal_send again.',
    )
    expect(await harness.text('terminal_open', { type: '' })).toBe(
      'invalid arguments for terminal_open:\n- type: type must name a terminal type, e.g. "shell"\nFix the arguments and call terminal_open again.',
    )
    expect(await harness.text('terminal_signal', { sessionId: 'pty-1', signal: 'SIGUSR1' })).toBe(
      'invalid arguments for terminal_signal:\n- signal: Invalid option: expected one of "SIGINT"|"SIGTERM"|"SIGKILL"|"SIGTSTP"|"SIGHUP"\nFix the arguments and call terminal_signal again.',
    )
    expect(await harness.text('terminal_read', { sessionId: 'pty-1', count: 0 })).toContain('- count: Too small')
  })

  it('names a terminal type that has no backend and lists the ones that do', async () => {
    harness = await boot()
    expect(await harness.text('terminal_open', { type: 'python' })).toBe(
      'NO_BACKEND: no PTY backend for type "python"; registered types: shell — call terminal_open with one of the registered types',
    )
  })

  it('refuses a duplicate name', async () => {
    harness = await boot()
    await harness.call('terminal_open', { type: 'shell', name: 'a' })
    expect(await harness.text('terminal_open', { type: 'shell', name: 'a' })).toBe(
      'DUPLICATE_NAME: agent-1 already has a PTY session named "a" (pty-1); pick another name or close it',
    )
  })

  it('refuses a terminal past the per-agent cap, naming the cap and its setting, until one is closed', async () => {
    harness = await boot({ pty: { maxSessionsPerOwner: 2 } })
    await harness.call('terminal_open', { type: 'shell' })
    await harness.call('terminal_open', { type: 'shell' })
    const refused = await harness.call('terminal_open', { type: 'shell' })
    expect(refused.isError).toBe(true)
    expect(refused.content[0]!.text).toBe(
      'TOO_MANY_SESSIONS: agent-1 already has 2 open terminals (pty.maxSessionsPerOwner: 2); close one first — terminal_list shows them; terminal_close the ones you no longer need',
    )
    // The cap is per agent: another agent still opens its own.
    expect((await harness.call('terminal_open', { type: 'shell' }, { agent: harness.other })).isError).toBeFalsy()
    await harness.call('terminal_close', { sessionId: 'pty-1' })
    expect(await harness.text('terminal_open', { type: 'shell' })).toMatch(/^\[opened: pty-4, cwd /)
  })

  it('refuses text over maxInputBytes, counting UTF-8 bytes, and writes nothing', async () => {
    await opened({ toolPty: { maxInputBytes: 20 } })
    const result = await harness.call('terminal_send', { sessionId: 'pty-1', text: 'export WRITTEN=ééééé' })
    expect(result.isError).toBe(true)
    expect(result.content[0]!.text).toBe(
      'INVALID_INPUT: text is 25 bytes, over the 20-byte limit (maxInputBytes); nothing was written. Send it in parts, or write it to a file and run that',
    )
    expect(await harness.text('terminal_send', { sessionId: 'pty-1', text: 'echo "[$WRITTEN]"' })).toMatch(/^\[\]\n/)
  })

  it('names the field of a bad config', async () => {
    const { Config } = await import('../src/index.ts')
    const parsed = Config.safeParse({ maxResultBytes: 10 })
    expect(parsed.error?.issues.map((issue) => issue.path.join('.'))).toEqual(['maxResultBytes'])
  })
})
