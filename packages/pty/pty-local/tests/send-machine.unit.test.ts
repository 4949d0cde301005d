/**
 * The send machine driven directly: events in, effects out, time given by each event (an
 * injected clock — nothing here waits).
 */
import { describe, expect, it } from 'vitest'
import type { ReadProbe } from '../src/inspector.ts'
import { ENTER, PASTE_END, PASTE_START, textSteps } from '../src/input-steps.ts'
import { initialState, transition, type OutputView, type SendEffect, type SendEvent, type SendSpec, type SendState } from '../src/send-machine.ts'

const SHELL = 4000
const CHILD = 4100

class View implements OutputView {
  markerCount = 0
  prompt = false
  line = ''
  markers() {
    return this.markerCount
  }
  promptShown(since: number) {
    return this.prompt && this.markerCount > since
  }
  promptLine() {
    return this.line
  }
  lastNonBlankLine() {
    return this.line
  }
  committed = ''
  lastLine() {
    return this.committed
  }
  owed = 0
  written = 0
  repliesOwed() {
    return this.owed
  }
  repliesWritten() {
    return this.written
  }
}

function spec(view: View, overrides: Partial<SendSpec> = {}): SendSpec {
  return {
    kind: 'send',
    steps: textSteps({ text: 'echo hi', submit: true }, { bracketedPaste: false, alternateScreen: false }),
    inputText: 'echo hi',
    timeoutMs: 30000,
    idleMs: 3000,
    handoffGraceMs: 500,
    pollIntervalMs: 50,
    exactProbeAfterMs: 150,
    submitWaitMs: 50,
    checkInput: false,
    readsTermios: false,
    drainsInput: false,
    endsInEscape: false,
    exact: true,
    observable: true,
    relayed: false,
    wrapperPid: SHELL - 1,
    shellPgid: SHELL,
    view,
    ...overrides,
  }
}

function reading(pgid: number, tid: number, switches: number, extra: Partial<ReadProbe> = {}): ReadProbe {
  return {
    verdict: 'reading',
    tpgid: pgid,
    tasks: [{ pid: tid, tid, name: 'prog', state: 'S', syscall: 'read', switches, fds: [0], terminalFd: 0 }],
    reader: { name: 'prog', pid: tid, tid, syscall: 'read', fd: 0, path: '/dev/pts/42' },
    detail: `prog[${tid}] read fd0 /dev/pts/42`,
    ...extra,
  }
}

/** A machine under test: feeds events, keeps the state, returns each step's effects. */
class Machine {
  state: SendState
  constructor(readonly view: View, overrides: Partial<SendSpec> = {}) {
    this.state = initialState(spec(view, overrides))
  }
  feed(event: SendEvent): SendEffect[] {
    const [state, effects] = transition(this.state, event)
    this.state = state
    return effects
  }
  /** The generation of the one effect of `type` in `effects`. */
  static gen(effects: SendEffect[], type: SendEffect['type']): number {
    const found = effects.filter((effect) => effect.type === type)
    expect(found).toHaveLength(1)
    return (found[0] as { gen: number }).gen
  }
}

const begin = (now = 0): SendEvent => ({ type: 'begin', now, aborted: false, exited: false, knownAtPrompt: true })
const baseline = (gen: number, now = 0, probe?: ReadProbe): SendEvent => ({
  type: 'baseline',
  gen,
  now,
  baseline: probe === undefined ? { kind: 'shell', pgid: SHELL, switches: 10 } : { kind: 'probe', probe },
  aborted: false,
  exited: false,
  knownAtPrompt: probe === undefined,
})

/** Runs a send at the shell's prompt up to the wait (text, echo, Enter); returns the machine. */
function written(view = new View(), overrides: Partial<SendSpec> = {}): Machine {
  const machine = new Machine(view, overrides)
  const base = Machine.gen(machine.feed(begin()), 'baseline')
  const write = Machine.gen(machine.feed(baseline(base)), 'write')
  machine.feed({ type: 'written', gen: write, now: 1 })
  view.line = '$ echo hi'
  const enter = machine.feed({ type: 'output', now: 1.2 })
  machine.feed({ type: 'written', gen: Machine.gen(enter, 'write'), now: 1.3 })
  expect(machine.state.phase).toBe('waiting')
  return machine
}

describe('a prompt the shell owed from before the send', () => {
  it('does not settle the send when it was shown before Enter was written; the prompt after Enter does', () => {
    const view = new View()
    const machine = new Machine(view)
    const base = Machine.gen(machine.feed({ type: 'begin', now: 0, aborted: false, exited: false, knownAtPrompt: false }), 'baseline')
    const write = Machine.gen(machine.feed({ ...(baseline(base) as Extract<SendEvent, { type: 'baseline' }>), knownAtPrompt: false }), 'write')
    machine.feed({ type: 'written', gen: write, now: 1 })
    // The owed prompt, then the echo of the text: Enter goes.
    view.markerCount = 1
    view.prompt = true
    view.line = '$ echo hi'
    const enter = machine.feed({ type: 'output', now: 1.2 })
    // Its marker is after the send's first write, so the shell is asked for at once; it is
    // blocked in its read (the Enter may still be on its way to it): drain, then the owed prompt
    // is not enough.
    const foreground = Machine.gen(machine.feed({ type: 'written', gen: Machine.gen(enter, 'write'), now: 1.3 }), 'foreground')
    expect(machine.state.phase).toBe('waiting')
    const drain = Machine.gen(machine.feed({ type: 'foreground', gen: foreground, now: 1.5, inFront: true, reading: true, pgid: SHELL }), 'drain')
    expect(machine.feed({ type: 'drained', gen: drain, now: 1.6 })).toEqual([])
    expect(machine.state.phase).toBe('waiting')
    // The answer and the next prompt arrive: that one settles it.
    view.markerCount = 2
    const again = Machine.gen(machine.feed({ type: 'output', now: 2 }), 'foreground')
    const drain2 = Machine.gen(machine.feed({ type: 'foreground', gen: again, now: 2.1, inFront: true, reading: true, pgid: SHELL }), 'drain')
    const settled = machine.feed({ type: 'drained', gen: drain2, now: 2.2 })
    expect(settled).toContainEqual(expect.objectContaining({ type: 'settle', waitReason: 'stdin_read' }))
  })

  for (const forgedDuring of ['the look', 'the drain'] as const) {
    it(`a marker printed while the command runs, during ${forgedDuring} the owed prompt started, does not settle the send: only a look made after it`, () => {
      const view = new View()
      const machine = new Machine(view, { drainsInput: true })
      const base = Machine.gen(machine.feed({ type: 'begin', now: 0, aborted: false, exited: false, knownAtPrompt: false }), 'baseline')
      const write = Machine.gen(machine.feed({ ...(baseline(base) as Extract<SendEvent, { type: 'baseline' }>), knownAtPrompt: false }), 'write')
      machine.feed({ type: 'written', gen: write, now: 1 })
      // The owed prompt arrives before the echo; the kernel shows the text consumed: Enter goes.
      view.markerCount = 1
      view.prompt = true
      view.line = '$ '
      expect(machine.feed({ type: 'output', now: 1.1 })).toEqual([])
      const consume = Machine.gen(machine.feed({ type: 'timer', timer: 'consumeRetry', now: 1.2 }), 'consume')
      const enter = Machine.gen(machine.feed({ type: 'consumed', gen: consume, now: 1.3, consumed: true }), 'write')
      // The owed prompt starts a look; bash still reads the line (Enter in the flip buffer).
      const look = Machine.gen(machine.feed({ type: 'written', gen: enter, now: 1.4 }), 'foreground')
      // The command runs and prints the marker and `$ `, read during the look or the drain after it.
      const forge = () => {
        view.markerCount = 2
        return machine.feed({ type: 'output', now: 1.6 })
      }
      const forged = forgedDuring === 'the look' ? forge() : []
      const drain = Machine.gen(machine.feed({ type: 'foreground', gen: look, now: 1.5, inFront: true, reading: true, inputTaken: true, pgid: SHELL }), 'drain')
      if (forgedDuring === 'the drain') forged.push(...forge())
      const drained = machine.feed({ type: 'drained', gen: drain, now: 1.7 })
      expect([...forged, ...drained]).not.toContainEqual(expect.objectContaining({ type: 'settle' }))
      // A look made after the marker shows the command in front: no settle.
      const after = Machine.gen([...forged, ...drained], 'foreground')
      expect(machine.feed({ type: 'foreground', gen: after, now: 1.8, inFront: false, reading: undefined, pgid: CHILD })).toEqual([])
      expect(machine.state.phase).toBe('waiting')
      // The command ends; the shell's own prompt settles the send.
      view.markerCount = 3
      const last = Machine.gen(machine.feed({ type: 'output', now: 1000 }), 'foreground')
      const drainLast = Machine.gen(machine.feed({ type: 'foreground', gen: last, now: 1001, inFront: true, reading: true, inputTaken: true, pgid: SHELL }), 'drain')
      expect(machine.feed({ type: 'drained', gen: drainLast, now: 1002 })).toContainEqual(expect.objectContaining({ type: 'settle', waitReason: 'stdin_read' }))
    })
  }
})

describe('input of only signal characters', () => {
  const busy: ReadProbe = { ...reading(CHILD, CHILD, 9), verdict: 'not_reading', reader: undefined }

  /** The settle of a send of `text` to a program busy at the write, ended by the shell's exit. */
  function settleOf(text: string): SendEffect | undefined {
    const machine = new Machine(new View(), { steps: textSteps({ text, submit: true }, { bracketedPaste: false, alternateScreen: false }), inputText: text })
    const write = Machine.gen(machine.feed(baseline(Machine.gen(machine.feed(begin()), 'baseline'), 0, busy)), 'write')
    machine.feed({ type: 'written', gen: write, now: 1 })
    if (machine.state.phase === 'submitting') machine.feed({ type: 'written', gen: Machine.gen(machine.feed({ type: 'timer', timer: 'consume', now: 51 }), 'write'), now: 52 })
    return machine.feed({ type: 'exit', now: 60, status: { state: 'exited', exitCode: 0, signal: null } }).find((effect) => effect.type === 'settle')
  }

  it('is typed ahead of no one: ISIG turns it into signals, and no earlier command is named', () => {
    for (const text of ['\x03', '\x1a', '\x1c']) {
      const settled = settleOf(text)
      expect(settled).toMatchObject({ type: 'settle', waitReason: 'session_exit' })
      expect(settled).not.toHaveProperty('earlier')
      expect(settled).toHaveProperty('inputState', undefined)
    }
    // Anything a reader reads is typed ahead of the busy program.
    expect(settleOf('ls')).toMatchObject({ inputState: 'not_reading', earlier: { program: 'prog', markersAtWrite: 0 } })
  })
})

describe('text after a signal character', () => {
  const steps = textSteps({ text: '\x03echo hi', submit: true }, { bracketedPaste: false, alternateScreen: false })

  it('to the shell at its prompt, is written once a prompt shows after the ^C, not on the kernel evidence', () => {
    const view = new View()
    view.markerCount = 1
    view.prompt = true
    const machine = new Machine(view, { steps, inputText: '\x03echo hi' })
    const interrupt = Machine.gen(machine.feed(baseline(Machine.gen(machine.feed(begin()), 'baseline'))), 'write')
    // No kernel look: the shell reads again before it discarded its line. The bound is a signal's
    // wait for readiness (handoffGraceMs), not an echo's (submitWaitMs): bash handles SIGINT first.
    expect(machine.feed({ type: 'written', gen: interrupt, now: 1 })).toEqual([{ type: 'arm', timer: 'consume', ms: 500 }])
    // The ^C, and the prompt from before it, are no new prompt.
    view.line = '$ ^C'
    expect(machine.feed({ type: 'output', now: 2 })).toEqual([])
    view.markerCount = 2
    view.line = '$ '
    expect(machine.feed({ type: 'output', now: 3 })).toEqual([
      { type: 'clear', timer: 'consume' },
      { type: 'write', gen: interrupt + 1, data: 'echo hi' },
    ])
    // The text after it waits for its echo as any other.
    expect(machine.feed({ type: 'written', gen: interrupt + 1, now: 4 })).toEqual([
      { type: 'arm', timer: 'consume', ms: 50 },
      { type: 'arm', timer: 'consumeRetry', ms: 1 },
    ])
  })

  it('to the shell, is written at the bound when no prompt comes', () => {
    const machine = new Machine(new View(), { steps, inputText: '\x03echo hi' })
    const interrupt = Machine.gen(machine.feed(baseline(Machine.gen(machine.feed(begin()), 'baseline'))), 'write')
    machine.feed({ type: 'written', gen: interrupt, now: 1 })
    expect(machine.feed({ type: 'timer', timer: 'consume', now: 501 })).toEqual([{ type: 'write', gen: interrupt + 1, data: 'echo hi' }])
  })

  it('to another reader (a REPL shows no prompt marker), is written on the kernel evidence', () => {
    const machine = new Machine(new View(), { steps, inputText: '\x03echo hi' })
    const interrupt = Machine.gen(machine.feed(baseline(Machine.gen(machine.feed(begin()), 'baseline'), 0, reading(CHILD, CHILD, 7))), 'write')
    expect(machine.feed({ type: 'written', gen: interrupt, now: 1 })).toEqual([
      { type: 'arm', timer: 'consume', ms: 50 },
      { type: 'arm', timer: 'consumeRetry', ms: 1 },
    ])
    const consume = Machine.gen(machine.feed({ type: 'timer', timer: 'consumeRetry', now: 2 }), 'consume')
    expect(machine.feed({ type: 'consumed', gen: consume, now: 3, consumed: true })).toEqual([
      { type: 'clear', timer: 'consume' },
      { type: 'write', gen: consume + 1, data: 'echo hi' },
    ])
  })
})

describe('a send, step by step', () => {
  it('takes the baseline, writes the text, writes Enter alone once the echo arrived, and arms the tiers', () => {
    const view = new View()
    const machine = new Machine(view)
    expect(machine.feed(begin())).toEqual([{ type: 'baseline', gen: 1 }])
    expect(machine.state.phase).toBe('baseline')
    expect(machine.feed(baseline(1))).toEqual([{ type: 'write', gen: 2, data: 'echo hi' }])
    const afterText = machine.feed({ type: 'written', gen: 2, now: 1 })
    expect(machine.state.phase).toBe('submitting')
    expect(afterText).toEqual([
      { type: 'arm', timer: 'consume', ms: 50 },
      { type: 'arm', timer: 'consumeRetry', ms: 1 },
    ])
    // No echo after a millisecond: ask the kernel.
    expect(machine.feed({ type: 'timer', timer: 'consumeRetry', now: 2 })).toEqual([{ type: 'consume', gen: 3, baseline: { kind: 'shell', pgid: SHELL, switches: 10 } }])
    // Output that is not yet the whole echo changes nothing.
    view.line = '$ echo'
    expect(machine.feed({ type: 'output', now: 1.1 })).toEqual([])
    view.line = '$ echo hi'
    expect(machine.feed({ type: 'output', now: 2.2 })).toEqual([
      { type: 'clear', timer: 'consume' },
      { type: 'write', gen: 4, data: ENTER },
    ])
    // The consumption check asked before the echo answers late: dropped.
    expect(machine.feed({ type: 'consumed', gen: 3, now: 1.25, consumed: true })).toEqual([])
    expect(machine.feed({ type: 'written', gen: 4, now: 1.3 })).toEqual([
      { type: 'written' },
      { type: 'arm', timer: 'deadline', ms: 30000 },
      { type: 'arm', timer: 'silence', ms: 3000 },
      { type: 'arm', timer: 'poll', ms: 150 },
    ])
  })

  it('writes Enter when the kernel shows the text consumed (no echo), and at the bound without any evidence', () => {
    const machine = new Machine(new View())
    const write = Machine.gen(machine.feed(baseline(Machine.gen(machine.feed(begin()), 'baseline'))), 'write')
    machine.feed({ type: 'written', gen: write, now: 1 })
    const consume = Machine.gen(machine.feed({ type: 'timer', timer: 'consumeRetry', now: 2 }), 'consume')
    // Not consumed yet: look again shortly.
    expect(machine.feed({ type: 'consumed', gen: consume, now: 1.1, consumed: false })).toEqual([{ type: 'arm', timer: 'consumeRetry', ms: 2 }])
    const again = Machine.gen(machine.feed({ type: 'timer', timer: 'consumeRetry', now: 2.1 }), 'consume')
    expect(machine.feed({ type: 'consumed', gen: again, now: 2.5, consumed: true })).toEqual([
      { type: 'clear', timer: 'consume' },
      { type: 'write', gen: again + 1, data: ENTER },
    ])

    const bounded = new Machine(new View(), { exact: false })
    const text = Machine.gen(bounded.feed(begin()), 'write')
    expect(bounded.feed({ type: 'written', gen: text, now: 1 })).toEqual([{ type: 'arm', timer: 'consume', ms: 50 }])
    expect(bounded.feed({ type: 'timer', timer: 'consume', now: 51 })).toEqual([{ type: 'write', gen: text + 1, data: ENTER }])
  })

  it('with the input queue readable, a reader other than the shell is looked at 1 ms after the write, then 1 ms doubling', () => {
    const view = new View()
    const machine = new Machine(view, { drainsInput: true, steps: textSteps({ text: '1+1', submit: true }, { bracketedPaste: false, alternateScreen: false }), inputText: '1+1' })
    const repl = reading(CHILD, CHILD, 7)
    const write = Machine.gen(machine.feed(baseline(Machine.gen(machine.feed(begin()), 'baseline'), 0, repl)), 'write')
    expect(machine.feed({ type: 'written', gen: write, now: 1 })).toEqual([
      { type: 'arm', timer: 'consume', ms: 50 },
      { type: 'arm', timer: 'consumeRetry', ms: 1 },
    ])
    const first = Machine.gen(machine.feed({ type: 'timer', timer: 'consumeRetry', now: 2 }), 'consume')
    // Still queued: the queue shows the read as soon as it returned, so the next look is 1 ms on, then 2 ms.
    expect(machine.feed({ type: 'consumed', gen: first, now: 2.2, consumed: false })).toEqual([{ type: 'arm', timer: 'consumeRetry', ms: 1 }])
    const second = Machine.gen(machine.feed({ type: 'timer', timer: 'consumeRetry', now: 3.2 }), 'consume')
    expect(machine.feed({ type: 'consumed', gen: second, now: 3.4, consumed: false })).toEqual([{ type: 'arm', timer: 'consumeRetry', ms: 2 }])
    const third = Machine.gen(machine.feed({ type: 'timer', timer: 'consumeRetry', now: 5.4 }), 'consume')
    expect(machine.feed({ type: 'consumed', gen: third, now: 5.5, consumed: true })).toEqual([
      { type: 'clear', timer: 'consume' },
      { type: 'write', gen: third + 1, data: ENTER },
    ])
  })

  it('with the input queue readable, the first output that is not the whole echo is a moment to look; later chunks wait for the timer', () => {
    const view = new View()
    const repl = reading(CHILD, CHILD, 7)
    const machine = new Machine(view, { drainsInput: true, steps: textSteps({ text: '1+1', submit: true }, { bracketedPaste: false, alternateScreen: false }), inputText: '1+1' })
    const text = Machine.gen(machine.feed(baseline(Machine.gen(machine.feed(begin()), 'baseline'), 0, repl)), 'write')
    machine.feed({ type: 'written', gen: text, now: 1 })
    // The echo of the first key: the reader runs; look now instead of at the timer.
    view.line = '> 1'
    expect(machine.feed({ type: 'output', now: 1.3 })).toEqual([
      { type: 'clear', timer: 'consumeRetry' },
      { type: 'consume', gen: text + 1, baseline: { kind: 'probe', probe: repl } },
    ])
    // More output while that look is on its way, or after it: nothing more is asked.
    view.line = '> 1+'
    expect(machine.feed({ type: 'output', now: 1.4 })).toEqual([])
    expect(machine.feed({ type: 'consumed', gen: text + 1, now: 1.5, consumed: false })).toEqual([{ type: 'arm', timer: 'consumeRetry', ms: 1 }])
    view.line = '> 1+ '
    expect(machine.feed({ type: 'output', now: 1.6 })).toEqual([])
    // The whole echo: Enter; a look still on its way would be dropped when it answers.
    const look = Machine.gen(machine.feed({ type: 'timer', timer: 'consumeRetry', now: 2.5 }), 'consume')
    view.line = '> 1+1'
    expect(machine.feed({ type: 'output', now: 2.6 })).toEqual([
      { type: 'clear', timer: 'consume' },
      { type: 'write', gen: look + 1, data: ENTER },
    ])
    expect(machine.feed({ type: 'consumed', gen: look, now: 2.8, consumed: true })).toEqual([])

    // At the shell's own prompt the first output is no moment to look (its echo comes at once).
    const shell = new Machine(new View(), { drainsInput: true })
    const typed = Machine.gen(shell.feed(baseline(Machine.gen(shell.feed(begin()), 'baseline'))), 'write')
    shell.feed({ type: 'written', gen: typed, now: 1 })
    shell.view.line = '$ echo'
    expect(shell.feed({ type: 'output', now: 1.1 })).toEqual([])
  })

  it('at the shell\'s prompt, looks at once when a program the command started shows a prompt after the echo\'s line; not on the echo or a finished line', () => {
    const view = new View()
    const machine = written(view)
    const probes = (effects: SendEffect[]) => effects.filter((effect) => effect.type === 'probe')
    // The echo, still open or already committed, and a finished line of output: no look.
    expect(probes(machine.feed({ type: 'output', now: 2 }))).toEqual([])
    view.committed = '$ echo hi'
    view.line = ''
    expect(probes(machine.feed({ type: 'output', now: 3 }))).toEqual([])
    // The program's prompt on the open line: a look now, not at the poll timer.
    view.line = '>>> '
    expect(probes(machine.feed({ type: 'output', now: 4 }))).toEqual([{ type: 'probe', gen: expect.any(Number), purpose: 'look' }])
  })

  it('settles stdin_read on the controlled prompt once the kernel shows the shell in front and reading', () => {
    const view = new View()
    const machine = written(view)
    view.markerCount = 1
    view.prompt = true
    view.line = '$ '
    const look = Machine.gen(machine.feed({ type: 'output', now: 2 }), 'foreground')
    // Not reading yet: looked at again in a millisecond.
    expect(machine.feed({ type: 'foreground', gen: look, now: 2.1, pgid: SHELL, inFront: true, reading: false })).toEqual([{ type: 'arm', timer: 'promptRecheck', ms: 1 }])
    const again = Machine.gen(machine.feed({ type: 'timer', timer: 'promptRecheck', now: 3.1 }), 'foreground')
    const effects = machine.feed({ type: 'foreground', gen: again, now: 3.2, pgid: SHELL, inFront: true, reading: true })
    expect(effects.filter((effect) => effect.type === 'clear').map((effect) => (effect as { timer: string }).timer).sort()).toEqual(['deadline', 'poll', 'silence'])
    // No group but the shell's was seen in front: the job a stop status may be about is told by its start only.
    expect(effects.at(-1)).toEqual({ type: 'settle', waitReason: 'stdin_read', evidence: { tier: 'prompt', detail: 'controlled prompt' }, inputState: 'prompt', writtenAt: 1.3, atPrompt: true, job: { since: 0 } })
    expect(machine.state.phase).toBe('settled')
    expect(machine.feed({ type: 'output', now: 4 })).toEqual([])
    expect(machine.feed({ type: 'exit', now: 4, status: { state: 'exited', exitCode: 0, signal: null } })).toEqual([])
  })

  it('a prompt settle names the latest group other than the shell seen in front: the job a stop status is about', () => {
    const view = new View()
    const machine = written(view)
    const probe = Machine.gen(machine.feed({ type: 'timer', timer: 'poll', now: 150 }), 'probe')
    machine.feed({ type: 'probed', gen: probe, now: 151, probe: { ...reading(CHILD, CHILD, 9), verdict: 'not_reading', reader: undefined }, costMs: 0 })
    view.markerCount = 1
    view.prompt = true
    view.line = '$ '
    const look = Machine.gen(machine.feed({ type: 'output', now: 160 }), 'foreground')
    const effects = machine.feed({ type: 'foreground', gen: look, now: 161, pgid: SHELL, inFront: true, reading: true })
    expect(effects.at(-1)).toMatchObject({ type: 'settle', atPrompt: true, job: { since: 0, pgid: CHILD } })
  })

  it('drops a probe result of a generation it no longer waits for', () => {
    const view = new View()
    const machine = written(view)
    const probe = Machine.gen(machine.feed({ type: 'timer', timer: 'poll', now: 150 }), 'probe')
    expect(machine.feed({ type: 'probed', gen: probe - 1, now: 151, probe: reading(CHILD, CHILD, 9), costMs: 0 })).toEqual([])
    expect(machine.state.awaiting.probe).toBe(probe)
  })
})

describe('the /proc tier', () => {
  /** A send to a REPL that was reading at the write (baseline: a probe with switches 7). */
  function toRepl(view = new View()): Machine {
    const machine = new Machine(view, { steps: textSteps({ text: '1+1', submit: false }, { bracketedPaste: false, alternateScreen: false }), inputText: '1+1' })
    const base = Machine.gen(machine.feed(begin()), 'baseline')
    const write = Machine.gen(machine.feed(baseline(base, 0, reading(CHILD, CHILD, 7))), 'write')
    machine.feed({ type: 'written', gen: write, now: 1 })
    return machine
  }

  it('confirms a new read after a quiet gap, drains, and settles stdin_read with the reader', () => {
    const view = new View()
    const machine = toRepl(view)
    view.line = '>>> '
    const probe = Machine.gen(machine.feed({ type: 'output', now: 20 }), 'probe')
    expect(machine.feed({ type: 'probed', gen: probe, now: 21, probe: reading(CHILD, CHILD, 9), costMs: 0.2 })).toEqual([{ type: 'arm', timer: 'confirm', ms: 5 }])
    const confirm = Machine.gen(machine.feed({ type: 'timer', timer: 'confirm', now: 17 }), 'probe')
    const drain = Machine.gen(machine.feed({ type: 'probed', gen: confirm, now: 27, probe: reading(CHILD, CHILD, 9), costMs: 0.2 }), 'drain')
    const effects = machine.feed({ type: 'drained', gen: drain, now: 27.5 })
    expect(effects.at(-1)).toMatchObject({ type: 'settle', waitReason: 'stdin_read', evidence: { tier: 'proc', detail: `prog[${CHILD}] read fd0 /dev/pts/42` }, inputState: 'prompt' })
  })

  it('a read proved again by a look that output during the drain started does not overtake the drain in flight', () => {
    const view = new View()
    const machine = toRepl(view)
    view.line = '>>> '
    const probe = Machine.gen(machine.feed({ type: 'output', now: 20 }), 'probe')
    machine.feed({ type: 'probed', gen: probe, now: 21, probe: reading(CHILD, CHILD, 9), costMs: 0.2 })
    const confirm = Machine.gen(machine.feed({ type: 'timer', timer: 'confirm', now: 26 }), 'probe')
    const drain = Machine.gen(machine.feed({ type: 'probed', gen: confirm, now: 27, probe: reading(CHILD, CHILD, 9), costMs: 0.2 }), 'drain')
    // Output the drain brought (a relay's, ahead of its sync) starts a look, whose window closes before the drain answers.
    view.line = '42'
    view.committed = '42'
    const look = Machine.gen(machine.feed({ type: 'output', now: 200 }), 'probe')
    view.line = '>>> '
    machine.feed({ type: 'probed', gen: look, now: 201, probe: reading(CHILD, CHILD, 11), costMs: 0.2 })
    const again = Machine.gen(machine.feed({ type: 'timer', timer: 'confirm', now: 206 }), 'probe')
    expect(machine.feed({ type: 'probed', gen: again, now: 207, probe: reading(CHILD, CHILD, 11), costMs: 0.2 }).filter((effect) => effect.type === 'drain')).toEqual([])
    const effects = machine.feed({ type: 'drained', gen: drain, now: 208 })
    expect(effects.at(-1)).toMatchObject({ type: 'settle', waitReason: 'stdin_read', evidence: { tier: 'proc' } })
  })

  it('hands a proved read of the shell at a controlled prompt to the prompt tier, with a look that replaces the one out', () => {
    const view = new View()
    const machine = toRepl(view)
    // The REPL exits; the shell prints its prompt. The look asked for it stays out.
    view.markerCount = 1
    view.prompt = true
    view.line = '$ '
    const early = Machine.gen(machine.feed({ type: 'output', now: 20 }), 'foreground')
    const probe = Machine.gen(machine.feed({ type: 'timer', timer: 'poll', now: 150 }), 'probe')
    machine.feed({ type: 'probed', gen: probe, now: 151, probe: reading(SHELL, SHELL, 3), costMs: 0 })
    const confirm = Machine.gen(machine.feed({ type: 'timer', timer: 'confirm', now: 156 }), 'probe')
    const drain = Machine.gen(machine.feed({ type: 'probed', gen: confirm, now: 156.5, probe: reading(SHELL, SHELL, 3), costMs: 0 }), 'drain')
    // Drained: not settled on the /proc tier, which carries no prompt status.
    const fresh = machine.feed({ type: 'drained', gen: drain, now: 157 })
    expect(fresh).toEqual([{ type: 'foreground', gen: expect.any(Number), shell: 'shell' }])
    // The early look, answered from before the shell was back in front, is dropped.
    expect(machine.feed({ type: 'foreground', gen: early, now: 158, pgid: CHILD, inFront: false, reading: undefined })).toEqual([])
    const again = Machine.gen(machine.feed({ type: 'foreground', gen: Machine.gen(fresh, 'foreground'), now: 158.5, pgid: SHELL, inFront: true, reading: true }), 'drain')
    const settled = machine.feed({ type: 'drained', gen: again, now: 159 })
    expect(settled.at(-1)).toMatchObject({ type: 'settle', waitReason: 'stdin_read', evidence: { tier: 'prompt' }, atPrompt: true })
  })

  it('on a relayed terminal, counts a read only once the reader read the bytes written since the baseline', () => {
    const view = new View()
    const machine = new Machine(view, { relayed: true, steps: textSteps({ text: '1+1', submit: true }, { bracketedPaste: false, alternateScreen: false }), inputText: '1+1' })
    const base = Machine.gen(machine.feed(begin()), 'baseline')
    const withRead = (switches: number, readBytes: number): ReadProbe => {
      const probe = reading(CHILD, CHILD, switches)
      return { ...probe, tasks: probe.tasks.map((task) => ({ ...task, readBytes })) }
    }
    const write = Machine.gen(machine.feed(baseline(base, 0, withRead(7, 100))), 'write')
    machine.feed({ type: 'written', gen: write, now: 1 })
    // Whether the text was consumed is asked with the bytes written so far (the input queue may be empty while they are in the relay).
    expect(machine.feed({ type: 'timer', timer: 'consumeRetry', now: 2 })).toEqual([{ type: 'consume', gen: write + 1, baseline: { kind: 'probe', probe: withRead(7, 100) }, inputBytes: 3 }])
    machine.feed({ type: 'consumed', gen: write + 1, now: 2.5, consumed: false })
    // The text was read and echoed; Enter goes, and is on its way through the relay.
    view.line = '>>> 1+1'
    const enter = Machine.gen(machine.feed({ type: 'output', now: 3 }), 'write')
    machine.feed({ type: 'written', gen: enter, now: 3 })
    expect(machine.state.phase).toBe('waiting')
    // The reader ran (it read the text) and waits again, Enter not read yet: no evidence.
    const early = Machine.gen(machine.feed({ type: 'timer', timer: 'poll', now: 150 }), 'probe')
    expect(machine.feed({ type: 'probed', gen: early, now: 151, probe: withRead(9, 103), costMs: 0 })).toEqual([])
    // All four bytes read: the read counts.
    const late = Machine.gen(machine.feed({ type: 'timer', timer: 'poll', now: 200 }), 'probe')
    expect(machine.feed({ type: 'probed', gen: late, now: 201, probe: withRead(11, 104), costMs: 0 })).toEqual([{ type: 'arm', timer: 'confirm', ms: 5 }])
  })

  it('never counts the read that was there before the write, and drops a confirmation that output interrupted', () => {
    const view = new View()
    const machine = toRepl(view)
    view.line = '>>> '
    const stale = Machine.gen(machine.feed({ type: 'output', now: 20 }), 'probe')
    // The same task with the same counter: the read from before the write.
    expect(machine.feed({ type: 'probed', gen: stale, now: 21, probe: reading(CHILD, CHILD, 7), costMs: 0 })).toEqual([])
    const probe = Machine.gen(machine.feed({ type: 'timer', timer: 'poll', now: 150 }), 'probe')
    machine.feed({ type: 'probed', gen: probe, now: 151, probe: reading(CHILD, CHILD, 9), costMs: 0 })
    expect(machine.state.phase === 'waiting' ? machine.state.wait.confirming : undefined).toBeDefined()
    const output = machine.feed({ type: 'output', now: 152 })
    expect(output).toContainEqual({ type: 'clear', timer: 'confirm' })
    expect(machine.state.phase === 'waiting' ? machine.state.wait.confirming : undefined).toBeUndefined()
  })

  it('paces probes by a tenth of their CPU cost (PROBE_DUTY_GAP)', () => {
    const view = new View()
    const machine = toRepl(view)
    const probe = Machine.gen(machine.feed({ type: 'output', now: 20 }), 'probe')
    machine.feed({ type: 'probed', gen: probe, now: 30, probe: undefined, costMs: 4 })
    expect(machine.feed({ type: 'output', now: 31 })).toContainEqual({ type: 'arm', timer: 'probeGap', ms: 35 })
  })

  it('looks again as soon as the duty cycle allows once the output ends in a prompt-shaped line', () => {
    const view = new View()
    const machine = toRepl(view)
    view.line = '1+1'
    const first = Machine.gen(machine.feed({ type: 'output', now: 20 }), 'probe')
    // The echo alone: the program is still evaluating, and the next look waits the floor.
    expect(machine.feed({ type: 'probed', gen: first, now: 21, probe: { ...reading(CHILD, CHILD, 9), verdict: 'not_reading', reader: undefined }, costMs: 0.3 })).toEqual([])
    expect(machine.feed({ type: 'output', now: 21.5 })).toContainEqual({ type: 'arm', timer: 'probeGap', ms: 9.5 })
    // Its answer and prompt: the armed gap is brought forward to 9 × the look's CPU cost.
    view.line = '> '
    const eager = machine.feed({ type: 'output', now: 22 })
    expect(eager).toContainEqual({ type: 'arm', timer: 'probeGap', ms: expect.closeTo(1.7, 5) })
    Machine.gen(machine.feed({ type: 'timer', timer: 'probeGap', now: 23.7 }), 'probe')
  })

  it('keeps probes nine times their CPU cost apart under a flood of prompt-shaped output', () => {
    const view = new View()
    const machine = toRepl(view)
    const probes: number[] = []
    let gen: number | undefined
    // A program redraws a prompt-like line every 0.1 ms for 100 ms; each probe costs 0.5 ms of CPU.
    for (let now = 20; now < 120; now += 0.1) {
      view.line = `> ${Math.round(now * 10)}`
      const effects = [...machine.feed({ type: 'output', now }), ...(machine.state.timers.includes('probeGap') && machine.state.phase === 'waiting' && machine.state.wait.pacer.gapAt <= now ? machine.feed({ type: 'timer', timer: 'probeGap', now }) : [])]
      const probe = effects.find((effect) => effect.type === 'probe')
      if (probe !== undefined) {
        probes.push(now)
        gen = (probe as { gen: number }).gen
      }
      if (gen !== undefined && now - probes.at(-1)! >= 0.2) {
        machine.feed({ type: 'probed', gen, now, probe: { ...reading(CHILD, CHILD, 9), verdict: 'not_reading', reader: undefined }, costMs: 0.5 })
        gen = undefined
      }
    }
    expect(probes.length).toBeGreaterThan(5)
    for (let i = 1; i < probes.length; i++) expect(probes[i]! - probes[i - 1]!).toBeGreaterThanOrEqual(0.2 + 4.5 - 1e-6)
  })

  it('corroborates a read with other wake sources only after a prompt-shaped line stayed quiet', () => {
    const view = new View()
    const machine = toRepl(view)
    view.line = '1+1'
    const withSocket = reading(CHILD, CHILD, 9, { sources: ['socket fd 21'] })
    const first = Machine.gen(machine.feed({ type: 'output', now: 20 }), 'probe')
    // Only the echo so far: not prompt-shaped, look again (paced).
    expect(machine.feed({ type: 'probed', gen: first, now: 21, probe: withSocket, costMs: 0 })).toEqual([{ type: 'arm', timer: 'probeGap', ms: 10 }])
    view.line = 'debug> '
    const second = Machine.gen(machine.feed({ type: 'timer', timer: 'probeGap', now: 31 }), 'probe')
    expect(machine.feed({ type: 'probed', gen: second, now: 22, probe: withSocket, costMs: 0 })).toEqual([{ type: 'arm', timer: 'confirm', ms: 100 }])
    const confirm = Machine.gen(machine.feed({ type: 'timer', timer: 'confirm', now: 122 }), 'probe')
    const drain = Machine.gen(machine.feed({ type: 'probed', gen: confirm, now: 123, probe: withSocket, costMs: 0 }), 'drain')
    // The evidence gives the window as measured: from the first sample (22) to the last (123).
    expect(machine.feed({ type: 'drained', gen: drain, now: 124 }).at(-1)).toMatchObject({
      waitReason: 'stdin_read',
      evidence: { tier: 'proc', corroborated: { sources: ['socket fd 21'], quietMs: 101 } },
    })
  })
})

describe('a timed read and a send without input', () => {
  it('confirms a read whose only other source is its own timeout as a plain read, with output not prompt-shaped, and names the timeout', () => {
    const view = new View()
    const machine = new Machine(view, { steps: textSteps({ text: 'top -d 1', submit: false }, { bracketedPaste: false, alternateScreen: false }), inputText: 'top -d 1' })
    const base = Machine.gen(machine.feed(begin()), 'baseline')
    machine.feed({ type: 'written', gen: Machine.gen(machine.feed(baseline(base)), 'write'), now: 1 })
    view.line = ''
    const timed = reading(CHILD, CHILD, 9, { sources: ['timer in 1000 ms'] })
    const probe = Machine.gen(machine.feed({ type: 'timer', timer: 'poll', now: 150 }), 'probe')
    expect(machine.feed({ type: 'probed', gen: probe, now: 151, probe: timed, costMs: 0 })).toEqual([{ type: 'arm', timer: 'confirm', ms: 5 }])
    const confirm = Machine.gen(machine.feed({ type: 'timer', timer: 'confirm', now: 156 }), 'probe')
    const drain = Machine.gen(machine.feed({ type: 'probed', gen: confirm, now: 157, probe: timed, costMs: 0 }), 'drain')
    const settled = machine.feed({ type: 'drained', gen: drain, now: 158 }).at(-1)
    expect(settled).toMatchObject({ type: 'settle', waitReason: 'stdin_read', evidence: { tier: 'proc', detail: `prog[${CHILD}] read fd0 /dev/pts/42; a timed read: its own timeout ends in 1000 ms, nothing else can wake it` } })
    expect((settled as Extract<SendEffect, { type: 'settle' }>).evidence.corroborated).toBeUndefined()
  })

  it('still corroborates a timeout that comes with another source', () => {
    const view = new View()
    const machine = new Machine(view, { steps: textSteps({ text: 'x', submit: false }, { bracketedPaste: false, alternateScreen: false }), inputText: 'x' })
    const base = Machine.gen(machine.feed(begin()), 'baseline')
    machine.feed({ type: 'written', gen: Machine.gen(machine.feed(baseline(base)), 'write'), now: 1 })
    const probe = Machine.gen(machine.feed({ type: 'timer', timer: 'poll', now: 150 }), 'probe')
    const effects = machine.feed({ type: 'probed', gen: probe, now: 151, probe: reading(CHILD, CHILD, 9, { sources: ['socket fd 6', 'timer in 1000 ms'] }), costMs: 0 })
    expect(effects.some((effect) => effect.type === 'arm' && effect.timer === 'confirm')).toBe(false)
  })

  it('a send without input probes at once and counts the read that was already there', () => {
    const view = new View()
    const machine = new Machine(view, { steps: [], inputText: '' })
    const base = Machine.gen(machine.feed(begin()), 'baseline')
    const already = reading(CHILD, CHILD, 7)
    const probe = Machine.gen(machine.feed(baseline(base, 0, already)), 'probe')
    expect(machine.feed({ type: 'probed', gen: probe, now: 1, probe: already, costMs: 0 })).toEqual([{ type: 'arm', timer: 'confirm', ms: 5 }])
    const confirm = Machine.gen(machine.feed({ type: 'timer', timer: 'confirm', now: 6 }), 'probe')
    const drain = Machine.gen(machine.feed({ type: 'probed', gen: confirm, now: 7, probe: already, costMs: 0 }), 'drain')
    expect(machine.feed({ type: 'drained', gen: drain, now: 8 }).at(-1)).toMatchObject({ type: 'settle', waitReason: 'stdin_read', evidence: { tier: 'proc' } })
  })

  describe('a reader waiting for the reply to its terminal query is not waiting for input', () => {
    /** A send without input up to the drain of a read proved over its window; returns the drain's generation. */
    function provedRead(machine: Machine, read: ReadProbe, now: number, probe?: number): number {
      const look = probe ?? Machine.gen(machine.feed(baseline(Machine.gen(machine.feed(begin()), 'baseline'), 0, read)), 'probe')
      machine.feed({ type: 'probed', gen: look, now, probe: read, costMs: 0 })
      const confirm = Machine.gen(machine.feed({ type: 'timer', timer: 'confirm', now: now + 5 }), 'probe')
      return Machine.gen(machine.feed({ type: 'probed', gen: confirm, now: now + 6, probe: read, costMs: 0 }), 'drain')
    }

    it('while its reply is owed, and then settles on a read proved after the reply went in', () => {
      const view = new View()
      const machine = new Machine(view, { steps: [], inputText: '' })
      const read = reading(CHILD, CHILD, 7)
      const drain = provedRead(machine, read, 1)
      // The drained output held a query (`ESC [ 6 n`); its reply is still on its way.
      view.owed = 1
      expect(machine.feed({ type: 'drained', gen: drain, now: 8 })).toEqual([{ type: 'arm', timer: 'probeGap', ms: 3 }])
      view.owed = 0
      view.written = 1
      const again = Machine.gen(machine.feed({ type: 'timer', timer: 'probeGap', now: 11 }), 'probe')
      expect(machine.feed({ type: 'drained', gen: provedRead(machine, read, 12, again), now: 19 }).at(-1)).toMatchObject({ type: 'settle', waitReason: 'stdin_read', evidence: { tier: 'proc' } })
    })

    it('when a reply went in after the window’s first look, though none is owed at the drain', () => {
      const view = new View()
      const machine = new Machine(view, { steps: [], inputText: '' })
      const read = reading(CHILD, CHILD, 7)
      const look = Machine.gen(machine.feed(baseline(Machine.gen(machine.feed(begin()), 'baseline'), 0, read)), 'probe')
      // Written while the window's samples were taken: they show the wait the reply ended.
      view.written = 1
      const drain = provedRead(machine, read, 1, look)
      expect(machine.feed({ type: 'drained', gen: drain, now: 8 })).toEqual([{ type: 'arm', timer: 'probeGap', ms: 3 }])
    })
  })

  it('a send without input settles on the controlled prompt shown before it', () => {
    const view = new View()
    view.markerCount = 3
    view.prompt = true
    const machine = new Machine(view, { steps: [], inputText: '' })
    const base = Machine.gen(machine.feed(begin()), 'baseline')
    const foreground = Machine.gen(machine.feed(baseline(base)), 'foreground')
    expect(machine.feed({ type: 'foreground', gen: foreground, now: 1, inFront: true, reading: true, pgid: SHELL }).at(-1)).toMatchObject({ type: 'settle', waitReason: 'stdin_read', evidence: { tier: 'prompt' } })
  })
})

describe('silence, timeout, exit', () => {
  it('takes one last probe at silence, then settles inferred_idle', () => {
    const machine = written()
    const probe = Machine.gen(machine.feed({ type: 'timer', timer: 'silence', now: 3001 }), 'probe')
    const effects = machine.feed({ type: 'probed', gen: probe, now: 3002, probe: undefined, costMs: 0 })
    expect(effects.at(-1)).toMatchObject({ type: 'settle', waitReason: 'inferred_idle', evidence: { tier: 'silence', detail: 'no output for 3000 ms' } })
  })

  it('settles timeout at the deadline and session_exit on the exit', () => {
    const timedOut = written()
    expect(timedOut.feed({ type: 'timer', timer: 'deadline', now: 30001 }).at(-1)).toMatchObject({ waitReason: 'timeout', evidence: { detail: 'not ready after 30000 ms' } })
    const exited = written()
    expect(exited.feed({ type: 'exit', now: 5, status: { state: 'exited', exitCode: 3, signal: null } }).at(-1)).toMatchObject({
      waitReason: 'session_exit',
      evidence: { tier: 'exit', detail: 'the shell exited with code 3' },
    })
  })

  it('a startup never settles on silence without output', () => {
    const view = new View()
    const machine = new Machine(view, { kind: 'startup', steps: [], inputText: '' })
    const effects = machine.feed(begin())
    expect(effects).toContainEqual({ type: 'arm', timer: 'deadline', ms: 30000 })
    expect(machine.feed({ type: 'timer', timer: 'silence', now: 3000 })).toEqual([])
    expect(machine.state.phase).toBe('waiting')
  })
})

describe('cancel and the handoff', () => {
  it('rejects SEND_CANCELLED before the write, handing the buffer on', () => {
    const machine = new Machine(new View())
    machine.feed(begin())
    const effects = machine.feed({ type: 'cancel', now: 0.5 })
    expect(effects.at(-1)).toMatchObject({ type: 'reject', error: { code: 'SEND_CANCELLED' }, handOn: true, keepAtPrompt: true })
    // The baseline that comes back later is stale.
    expect(machine.feed(baseline(1))).toEqual([])
  })

  it('after the write: waits for the handoff, interrupts with SIGINT, then gives the program the grace', () => {
    const machine = written()
    const look = Machine.gen(machine.feed({ type: 'cancel', now: 2 }), 'handoffLook')
    // The shell is still in front: look again, paced.
    expect(machine.feed({ type: 'handoffLook', gen: look, now: 2.5, look: { pgid: SHELL } })).toEqual([{ type: 'arm', timer: 'handoff', ms: 10 }])
    const again = Machine.gen(machine.feed({ type: 'timer', timer: 'handoff', now: 12.5 }), 'handoffLook')
    const signal = machine.feed({ type: 'handoffLook', gen: again, now: 13, look: { pgid: CHILD, otherProgram: true } })
    expect(signal).toContainEqual({ type: 'handedOff' })
    const gen = Machine.gen(signal, 'signal')
    expect(signal).toContainEqual({ type: 'signal', gen, signal: 'SIGINT' })
    expect(machine.feed({ type: 'signalled', gen, now: 14, result: { signal: 'SIGINT', delivered: true, targetPgid: CHILD, target: 'sleep' } })).toEqual([
      { type: 'arm', timer: 'deadline', ms: 500 },
      { type: 'cancelled' },
    ])
    expect(machine.feed({ type: 'timer', timer: 'deadline', now: 514 }).at(-1)).toMatchObject({ waitReason: 'timeout', evidence: { tier: 'cancel' } })
  })

  it('a cancel while the text waits for consumption still writes the Enter (the input goes whole), then interrupts', () => {
    const machine = new Machine(new View(), { exact: false })
    const write = Machine.gen(machine.feed(begin()), 'write')
    machine.feed({ type: 'written', gen: write, now: 1 })
    expect(machine.feed({ type: 'cancel', now: 2 })).toEqual([])
    const enter = Machine.gen(machine.feed({ type: 'timer', timer: 'consume', now: 51 }), 'write')
    const effects = machine.feed({ type: 'written', gen: enter, now: 52 })
    expect(machine.state.phase).toBe('waiting')
    expect(effects).toContainEqual({ type: 'handoffLook', gen: enter + 1, waiting: undefined })
  })
})

describe('a send ending in ESC', () => {
  /** A reader in a wait that ends on its own after `timeoutMs` (an escape wait). */
  const timed = (switches: number, timeoutMs: number): ReadProbe => {
    const probe = reading(CHILD, CHILD, switches, { sources: [`timer in ${timeoutMs} ms`] })
    return { ...probe, tasks: probe.tasks.map((task) => ({ ...task, syscall: 'pselect6', timeoutMs })) }
  }

  it('defers silence while the reader sits in its escape wait, and settles once it was seen to leave it', () => {
    const machine = new Machine(new View(), { steps: textSteps({ text: 'ihello\x1b', submit: false }, { bracketedPaste: false, alternateScreen: false }), inputText: 'ihello\x1b', idleMs: 30, endsInEscape: true })
    const base = Machine.gen(machine.feed(begin()), 'baseline')
    const write = Machine.gen(machine.feed(baseline(base, 0, reading(CHILD, CHILD, 7))), 'write')
    machine.feed({ type: 'written', gen: write, now: 1 })
    const look = Machine.gen(machine.feed({ type: 'timer', timer: 'silence', now: 31 }), 'probe')
    // In vim's 100 ms ttimeoutlen wait: not settled; silence again after the wait's timeout.
    expect(machine.feed({ type: 'probed', gen: look, now: 32, probe: timed(9, 100), costMs: 0 })).toContainEqual({ type: 'arm', timer: 'silence', ms: 150 })
    expect(machine.state.phase).toBe('waiting')
    const again = Machine.gen(machine.feed({ type: 'timer', timer: 'silence', now: 182 }), 'probe')
    // Woken from it (its counter moved) and waiting again: the ESC was taken as a key.
    const effects = machine.feed({ type: 'probed', gen: again, now: 183, probe: timed(11, 100), costMs: 0 })
    expect(effects.at(-1)).toMatchObject({ type: 'settle', waitReason: 'inferred_idle' })
  })

  it('defers silence while the reader has not read since the write (the ESC still queued), at most eight times', () => {
    const machine = new Machine(new View(), { steps: textSteps({ text: '\x1b', submit: false }, { bracketedPaste: false, alternateScreen: false }), inputText: '\x1b', idleMs: 30, endsInEscape: true })
    const base = Machine.gen(machine.feed(begin()), 'baseline')
    const write = Machine.gen(machine.feed(baseline(base, 0, reading(CHILD, CHILD, 7))), 'write')
    machine.feed({ type: 'written', gen: write, now: 1 })
    let now = 31
    for (let deferral = 0; deferral < 8; deferral++) {
      const look = Machine.gen(machine.feed({ type: 'timer', timer: 'silence', now }), 'probe')
      // The wait from before the write, not left: the program has not read the ESC.
      expect(machine.feed({ type: 'probed', gen: look, now: now + 1, probe: reading(CHILD, CHILD, 7), costMs: 0 })).toContainEqual({ type: 'arm', timer: 'silence', ms: 50 })
      now += 51
    }
    const last = Machine.gen(machine.feed({ type: 'timer', timer: 'silence', now }), 'probe')
    expect(machine.feed({ type: 'probed', gen: last, now: now + 1, probe: reading(CHILD, CHILD, 7), costMs: 0 }).at(-1)).toMatchObject({ type: 'settle', waitReason: 'inferred_idle' })
  })

  it('Enter after a step ending in ESC is written once the program took the ESC as the Escape key, not in its wait for the rest of a sequence', () => {
    // Submitted, a text ending in ESC gets no Enter; a key after it (keys: [{text}, 'Enter']) waits.
    expect(textSteps({ text: 'ihello\x1b', submit: true }, { bracketedPaste: false, alternateScreen: true }).map((step) => step.data)).toEqual(['ihello\x1b'])
    const steps = [...textSteps({ text: 'ihello\x1b', submit: false }, { bracketedPaste: false, alternateScreen: true }), { data: '\r', afterConsumed: true, echo: '' }] as SendSpec['steps']
    const machine = new Machine(new View(), { steps, inputText: 'ihello\x1b' })
    const base = Machine.gen(machine.feed(begin()), 'baseline')
    const text = Machine.gen(machine.feed(baseline(base, 0, reading(CHILD, CHILD, 7))), 'write')
    machine.feed({ type: 'written', gen: text, now: 1 })
    const consume = Machine.gen(machine.feed({ type: 'timer', timer: 'consumeRetry', now: 2 }), 'consume')
    // Consumed: not Enter yet, but a look at the reader's wait.
    const look = Machine.gen(machine.feed({ type: 'consumed', gen: consume, now: 3, consumed: true }), 'probe')
    // Still busy with the text (no read since the write): look again after pollIntervalMs.
    expect(machine.feed({ type: 'probed', gen: look, now: 4, probe: reading(CHILD, CHILD, 7), costMs: 0 })).toEqual([{ type: 'arm', timer: 'consumeRetry', ms: 50 }])
    // Output meanwhile (vim redraws) writes nothing.
    expect(machine.feed({ type: 'output', now: 20 })).toEqual([])
    const second = Machine.gen(machine.feed({ type: 'timer', timer: 'consumeRetry', now: 54 }), 'probe')
    // In vim's 100 ms ttimeoutlen wait: Enter there would be read with the ESC as one sequence.
    expect(machine.feed({ type: 'probed', gen: second, now: 55, probe: timed(9, 100), costMs: 0 })).toEqual([{ type: 'arm', timer: 'consumeRetry', ms: 150 }])
    const third = Machine.gen(machine.feed({ type: 'timer', timer: 'consumeRetry', now: 205 }), 'probe')
    // Woken from it and waiting again: the ESC was taken as a key; Enter goes, and is the last step.
    const enter = machine.feed({ type: 'probed', gen: third, now: 206, probe: timed(11, 100), costMs: 0 })
    expect(enter).toEqual([{ type: 'write', gen: third + 1, data: '\r' }])
    machine.feed({ type: 'written', gen: third + 1, now: 207 })
    expect(machine.state.phase).toBe('waiting')
  })

  it('Enter after a key ending in ESC goes at the latest after eight looks at a reader that never takes it', () => {
    const steps = [
      { data: '\x1b', key: { kind: 'named', name: 'escape' }, afterConsumed: false, echo: '' },
      { data: '\r', afterConsumed: true, echo: '' },
    ] as SendSpec['steps']
    const machine = new Machine(new View(), { steps, inputText: '' })
    const base = Machine.gen(machine.feed(begin()), 'baseline')
    const key = Machine.gen(machine.feed(baseline(base, 0, reading(CHILD, CHILD, 7))), 'write')
    machine.feed({ type: 'written', gen: key, now: 1 })
    // The bound passes without evidence of consumption: the escape wait decides.
    let look = Machine.gen(machine.feed({ type: 'timer', timer: 'consume', now: 51 }), 'probe')
    let now = 52
    for (let deferral = 0; deferral < 8; deferral++) {
      expect(machine.feed({ type: 'probed', gen: look, now, probe: reading(CHILD, CHILD, 7), costMs: 0 })).toEqual([{ type: 'arm', timer: 'consumeRetry', ms: 50 }])
      now += 50
      look = Machine.gen(machine.feed({ type: 'timer', timer: 'consumeRetry', now }), 'probe')
    }
    expect(machine.feed({ type: 'probed', gen: look, now: now + 1, probe: reading(CHILD, CHILD, 7), costMs: 0 })).toEqual([{ type: 'write', gen: look + 1, data: '\r' }])
  })

  it('does not defer for an escape wait when the input does not end in ESC: a timed key read is confirmed as a read', () => {
    const machine = new Machine(new View(), { steps: textSteps({ text: 'ihello', submit: false }, { bracketedPaste: false, alternateScreen: false }), inputText: 'ihello', idleMs: 30 })
    const base = Machine.gen(machine.feed(begin()), 'baseline')
    const write = Machine.gen(machine.feed(baseline(base, 0, reading(CHILD, CHILD, 7))), 'write')
    machine.feed({ type: 'written', gen: write, now: 1 })
    const look = Machine.gen(machine.feed({ type: 'timer', timer: 'silence', now: 31 }), 'probe')
    const effects = machine.feed({ type: 'probed', gen: look, now: 32, probe: timed(9, 100), costMs: 0 })
    expect(effects).not.toContainEqual({ type: 'arm', timer: 'silence', ms: 150 })
    expect(machine.state.phase === 'waiting' ? machine.state.wait.confirming : undefined).toBeDefined()
  })
})

describe('write steps of a text', () => {
  it('types the text, then Enter separately; without submit only the text', () => {
    expect(textSteps({ text: 'hello', submit: true }, { bracketedPaste: true, alternateScreen: false })).toEqual([
      { data: 'hello', afterConsumed: false, echo: 'hello' },
      { data: '\r', afterConsumed: true, echo: '' },
    ])
    expect(textSteps({ text: 'hello', submit: false }, { bracketedPaste: false, alternateScreen: false })).toEqual([{ data: 'hello', afterConsumed: false, echo: 'hello' }])
    expect(textSteps({ text: '', submit: true }, { bracketedPaste: false, alternateScreen: false })).toEqual([{ data: '\r', afterConsumed: false, echo: '' }])
  })

  it('pastes multi-line text as one bracketed paste when the program asked for it, else types line by line', () => {
    const text = 'for i in 1 2; do\n  echo $i\ndone'
    expect(textSteps({ text, submit: true }, { bracketedPaste: true, alternateScreen: false })[0]!.data).toBe(`${PASTE_START}for i in 1 2; do\r  echo $i\rdone${PASTE_END}`)
    expect(textSteps({ text, submit: true }, { bracketedPaste: false, alternateScreen: false })[0]!.data).toBe('for i in 1 2; do\r  echo $i\rdone')
  })

  it('pastes only a block of text for a line editor: a single line, control characters and a full-screen program are typed', () => {
    const line = { bracketedPaste: true, alternateScreen: false }
    const data = (text: string, submit: boolean, modes = line) => textSteps({ text, submit }, modes).map((step) => step.data)
    // A single line with its trailing CR, and a vim command after an <Esc>, are keystrokes.
    expect(data(':wq\n', false)).toEqual([':wq\r'])
    expect(data('ihello\x1b:wq\n', false)).toEqual(['ihello\x1b:wq\r'])
    // A full-screen program (alternate screen) gets every text typed, blocks too.
    expect(data(':%s/a/b/\n:wq\n', false, { bracketedPaste: true, alternateScreen: true })).toEqual([':%s/a/b/\r:wq\r'])
    // A block's trailing line breaks are typed after the paste, then Enter.
    expect(textSteps({ text: 'x = 6\ny = 7\n', submit: true }, line)).toEqual([
      { data: `${PASTE_START}x = 6\ry = 7${PASTE_END}`, afterConsumed: false, echo: 'y = 7' },
      { data: '\r', afterConsumed: true, echo: '' },
      { data: '\r', afterConsumed: true, echo: '' },
    ])
    // Tab stays in a block (a paste takes it literally, typed it completes).
    expect(data('if x:\n\tpass', false)).toEqual([`${PASTE_START}if x:\r\tpass${PASTE_END}`])
  })
})

describe('input checks and hidden input', () => {
  it('asks before the first write when the input must be checked; a refusal writes nothing and hands the buffer on', () => {
    const machine = new Machine(new View(), { checkInput: true })
    const base = Machine.gen(machine.feed(begin()), 'baseline')
    const check = Machine.gen(machine.feed(baseline(base)), 'checkInput')
    expect(machine.state.phase).toBe('checking')
    const refusal = new Error('too long')
    const effects = machine.feed({ type: 'inputChecked', gen: check, now: 1, refusal })
    expect(effects.some((effect) => effect.type === 'write')).toBe(false)
    expect(effects.at(-1)).toEqual({ type: 'reject', error: refusal, handOn: true, keepAtPrompt: true })
    expect(machine.state.phase).toBe('settled')
  })

  it('writes once the check passes, and a cancel while checking writes nothing', () => {
    const machine = new Machine(new View(), { checkInput: true })
    const check = Machine.gen(machine.feed(baseline(Machine.gen(machine.feed(begin()), 'baseline'))), 'checkInput')
    // A stale answer is dropped.
    expect(machine.feed({ type: 'inputChecked', gen: check + 7, now: 1, refusal: undefined })).toEqual([])
    expect(machine.feed({ type: 'inputChecked', gen: check, now: 1, refusal: undefined })).toEqual([{ type: 'write', gen: check + 1, data: 'echo hi' }])

    const cancelled = new Machine(new View(), { checkInput: true })
    Machine.gen(cancelled.feed(baseline(Machine.gen(cancelled.feed(begin()), 'baseline'))), 'checkInput')
    const effects = cancelled.feed({ type: 'cancel', now: 2 })
    expect(effects.at(-1)).toMatchObject({ type: 'reject', handOn: true })
    expect(effects.some((effect) => effect.type === 'write')).toBe(false)
  })

  it('a named key step is written as a key, encoded by the driver when it writes', () => {
    const key = { kind: 'named' as const, name: 'Up' as const, ctrl: false, meta: false, shift: false }
    const machine = new Machine(new View(), { steps: [{ data: '\x1b[A', key, afterConsumed: false, echo: '' }] })
    const base = Machine.gen(machine.feed(begin()), 'baseline')
    expect(machine.feed(baseline(base))).toEqual([{ type: 'write', gen: base + 1, data: '\x1b[A', key }])
  })

  it('a proved read(2) of a send asks termios before it settles, and settles hidden when echo is off', () => {
    const view = new View()
    const machine = written(view, { readsTermios: true })
    view.line = 'Password: '
    const probe = Machine.gen(machine.feed({ type: 'timer', timer: 'poll', now: 151 }), 'probe')
    const read = reading(SHELL, SHELL, 11)
    machine.feed({ type: 'probed', gen: probe, now: 152, probe: read, costMs: 0 })
    const confirm = Machine.gen(machine.feed({ type: 'timer', timer: 'confirm', now: 157 }), 'probe')
    const drain = Machine.gen(machine.feed({ type: 'probed', gen: confirm, now: 158, probe: read, costMs: 0 }), 'drain')
    const termios = Machine.gen(machine.feed({ type: 'drained', gen: drain, now: 159 }), 'termios')
    expect(machine.state.phase).toBe('waiting')
    const settled = machine.feed({ type: 'termios', gen: termios, now: 160, hidden: true })
    expect(settled.at(-1)).toMatchObject({ type: 'settle', waitReason: 'stdin_read', inputState: 'hidden' })
  })

  it('output between the read and the termios answer means looking again, not settling', () => {
    const view = new View()
    const machine = written(view, { readsTermios: true })
    const probe = Machine.gen(machine.feed({ type: 'timer', timer: 'poll', now: 151 }), 'probe')
    const read = reading(SHELL, SHELL, 11)
    machine.feed({ type: 'probed', gen: probe, now: 152, probe: read, costMs: 0 })
    const confirm = Machine.gen(machine.feed({ type: 'timer', timer: 'confirm', now: 157 }), 'probe')
    const drain = Machine.gen(machine.feed({ type: 'probed', gen: confirm, now: 158, probe: read, costMs: 0 }), 'drain')
    const termios = Machine.gen(machine.feed({ type: 'drained', gen: drain, now: 159 }), 'termios')
    machine.feed({ type: 'output', now: 159.5 })
    const after = machine.feed({ type: 'termios', gen: termios, now: 170, hidden: false })
    expect(after.some((effect) => effect.type === 'settle')).toBe(false)
    expect(machine.state.phase).toBe('waiting')
  })
})
