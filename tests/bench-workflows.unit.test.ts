import { describe, expect, it } from 'vitest'
import { checkTargets } from '../bench/targets.ts'
import { summarise, workflowCost, type WorkflowRow } from '../bench/workflows.ts'
import { incremental, OWN } from '../bench/workflows/harnesses.ts'

const row = (name: string, conch: [number, number, number], tmux: [number, number, number], pipe: [number, number, number]): WorkflowRow => {
  const cost = ([bytes, calls, wall_ms]: [number, number, number]) => ({ bytes, harness_bytes: bytes / 10, calls, wall_ms })
  return { name, conch: cost(conch), tmux: cost(tmux), pipe: cost(pipe) }
}

describe('workflow figures', () => {
  it('a way costs the median of its rounds, each figure on its own', () => {
    const runs = [
      { bytes: 300, harness_bytes: 30, calls: 4, wall_ms: 90 },
      { bytes: 100, harness_bytes: 20, calls: 4, wall_ms: 120 },
      { bytes: 200, harness_bytes: 40, calls: 5, wall_ms: 100.123 },
    ]
    expect(workflowCost(runs)).toEqual({ bytes: 200, harness_bytes: 30, calls: 4, wall_ms: 100.12 })
  })

  it('totals add every workflow and the ratios are conch over the tmux harness', () => {
    const figures = summarise([row('a', [100, 2, 50], [200, 2, 500], [10, 1, 40]), row('b', [300, 3, 150], [300, 4, 500], [20, 2, 60])], 2)
    expect(figures).toMatchObject({ conch_bytes: 400, tmux_bytes: 500, pipe_bytes: 30, conch_harness_bytes: 40, tmux_harness_bytes: 50, pipe_harness_bytes: 3, conch_calls: 5, tmux_calls: 6, pipe_calls: 3, conch_wall_ms: 200, tmux_wall_ms: 1000, pipe_wall_ms: 100, bytes_ratio: 0.8, wall_ratio: 0.2, rounds: 2 })
    expect(figures.workflows.map((w) => w.name)).toEqual(['a', 'b'])
  })

  it('the targets read conch against 0.7 × the tmux bytes and 0.3 × its wall time', () => {
    const workflows = summarise([row('a', [400, 2, 200], [500, 2, 1000], [10, 1, 40])], 1)
    const checks = checkTargets({ machine: {} as never, workflows }).filter((t) => t.figure.startsWith('workflows.'))
    expect(checks).toEqual([
      { figure: 'workflows.conch_bytes', value: 400, limit: '≤ 0.7 × tmux_bytes = 350', met: false, missed_by: 50 },
      { figure: 'workflows.conch_wall_ms', value: 200, limit: '≤ 0.3 × tmux_wall_ms = 300', met: true },
    ])
  })
})

describe('what each harness writes itself', () => {
  const own = (harness: keyof typeof OWN, text: string) => text.match(OWN[harness]) ?? []

  it("conch's status lines, not the program's output", () => {
    expect(own('conch', 'make\nmake: *** [all] Error 2\n[exit: 2]\n[session: exited code=1]')).toEqual(['[exit: 2]', '[session: exited code=1]'])
    expect(own('conch', '[screen: alternate 40x160, cursor 1,14]\nAdd a greeting  ← cursor\n[rows 2-39 unchanged]')).toEqual(['[screen: alternate 40x160, cursor 1,14]', '  ← cursor', '[rows 2-39 unchanged]'])
    const started = '[task: task-1 started in pty-1]'
    expect(own('conch', `${started}\n[notification: task-1 exited 0; evidence: controlled prompt]\nBUILD OK`)).toEqual([started, '[notification: task-1 exited 0; evidence: controlled prompt]'])
  })

  it("the tmux harness's headers and the wait it appends", () => {
    expect(own('tmux', 'New Terminal Output:\n make; tmux wait -S wf-1-0\nok')).toEqual(['New Terminal Output:', '; tmux wait -S wf-1-0'])
  })

  it("the pipe tool's notes", () => {
    expect(own('pipe', 'boom\nExit code 1\n(no output)')).toEqual(['Exit code 1', '(no output)'])
  })
})

describe('the Terminus-shaped capture', () => {
  it('hands over only what follows the previous capture', () => {
    expect(incremental('$ ls\na\n$', '$ ls\na\n$ echo hi\nhi\n$', 'unused')).toBe('New Terminal Output:\n echo hi\nhi\n$')
  })

  it('hands over the visible screen when the previous capture is gone (a full-screen program)', () => {
    expect(incremental('$ less log', '~\n~\nlog (END)', '~\n~\nlog (END)')).toBe('Current Terminal Screen:\n~\n~\nlog (END)')
  })

  it('hands over the visible screen when nothing new came, and on the first capture', () => {
    expect(incremental('$ sleep 1\n', '$ sleep 1\n  ', '$ sleep 1')).toBe('Current Terminal Screen:\n$ sleep 1')
    expect(incremental(undefined, '$', '$')).toBe('Current Terminal Screen:\n$')
  })
})
