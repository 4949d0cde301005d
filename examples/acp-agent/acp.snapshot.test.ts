/**
 * The acp-agent snapshot suite: each folder under scenarios/ is a conversation between an ACP
 * client built on the SDK's `client()` API and `conch acp` running as a process over stdio.
 * What conch wrote to stdout (protocol frames only) is compared, normalised, with the
 * scenario's `stdout.expected.jsonl`: JSON-RPC ids renumbered, session ids, pids, times and
 * the workspace path replaced, and each run of live-output updates of one tool call collapsed
 * to its last (how many arrive depends on the terminal's timing).
 *
 * `pnpm test:snapshot` compares; `pnpm test:snapshot:update` rewrites the expectations.
 */
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { describe, expect, it } from 'vitest'
import {
  alive,
  collapseLiveOutput,
  jsonLines,
  matchExpectation,
  Normaliser,
  processesIn,
  readAcpInput,
  renumberIds,
  runAcpScenario,
  scenarios,
  updateText,
  type AcpRun,
} from '@conch/test-support/snapshot'

const here = dirname(fileURLToPath(import.meta.url))
const SCENARIOS = join(here, 'scenarios')

/** Checks beyond the transcript, on what the client observed as it happened. */
const observed: Record<string, (run: AcpRun) => void> = {
  'real-terminal': (run) => {
    const updates = run.notifications.map((n) => n.update)
    const call = updates.find((u) => u.sessionUpdate === 'tool_call' && u.title.includes('for i in 1 2 3'))
    expect(call, 'the tool_call of the tick loop').toBeDefined()
    const id = call?.sessionUpdate === 'tool_call' ? call.toolCallId : ''
    const ofCall = run.notifications.filter((n) => n.update.sessionUpdate === 'tool_call_update' && n.update.toolCallId === id)
    const live = ofCall.filter((n) => n.update.sessionUpdate === 'tool_call_update' && n.update.status == null).map(updateText)
    // The real shell's output reached the client while the loop still ran: an update showed
    // tick-1 before tick-3 existed (the ticks are a second apart), and the last shows all.
    expect(live.length).toBeGreaterThanOrEqual(2)
    expect(live.some((text) => text.includes('tick-1') && !text.includes('tick-3'))).toBe(true)
    expect(live.at(-1)).toMatch(/tick-1\r?\n(.*\n)*tick-2\r?\n(.*\n)*tick-3/)
    const final = ofCall.at(-1)?.update
    expect(final?.sessionUpdate === 'tool_call_update' && final.status).toBe('completed')
  },
  'cancel-sleep': (run) => {
    const texts = run.notifications.map(updateText)
    expect(texts.some((text) => text.includes('[interrupted: the turn was cancelled, so SIGINT was sent to the foreground]'))).toBe(true)
    expect(texts.some((text) => text.includes('after the cancel: status 130'))).toBe(true)
  },
}

describe('acp-agent', () => {
  for (const name of scenarios(SCENARIOS)) {
    it(`${name}: an ACP client sees the expected frames on conch acp's stdout, and conch exits 0 leaving no process`, async () => {
      const dir = join(SCENARIOS, name)
      const workspace = mkdtempSync(join(tmpdir(), 'conch-snapshot-'))
      try {
        const input = readAcpInput(dir, workspace)
        const run = await runAcpScenario({ exampleDir: here, scenarioDir: dir, input, workspace })
        expect(run.code, run.stderr).toBe(0)
        for (const frame of run.frames) expect(frame, 'stdout carries JSON-RPC frames only').toMatchObject({ jsonrpc: '2.0' })

        // Every shell the scenario started (each prints "shell pid N") is gone, and nothing
        // else is left running in the workspace.
        const pids = [...JSON.stringify(run.frames).matchAll(/shell pid (\d+)/g)].map((match) => Number(match[1]))
        for (const pid of new Set(pids)) expect(alive(pid), `shell ${pid} still runs`).toBe(false)
        expect(processesIn(workspace)).toEqual([])

        observed[name]?.(run)

        const normaliser = new Normaliser({ kind: input.kind, workspaces: [workspace] })
        const frames = renumberIds(collapseLiveOutput(run.frames)).map((frame) => normaliser.value(frame))
        matchExpectation(join(dir, 'stdout.expected.jsonl'), jsonLines(frames))
      } finally {
        rmSync(workspace, { recursive: true, force: true })
      }
    })
  }
})

describe('conch acp shutdown', () => {
  it('exits 0 on SIGTERM in the middle of a send, leaving neither the shell nor its sleep running', async () => {
    const dir = join(SCENARIOS, 'cancel-sleep')
    const workspace = mkdtempSync(join(tmpdir(), 'conch-snapshot-'))
    try {
      const scenario = readAcpInput(dir, workspace)
      // The cancel-sleep conversation up to the running sleep; then SIGTERM instead of a cancel.
      const steps = scenario.steps.slice(0, scenario.steps.findIndex((step) => 'cancel' in step))
      const run = await runAcpScenario({ exampleDir: here, scenarioDir: dir, input: { ...scenario, steps }, workspace, end: 'SIGTERM' })
      expect(run.code, run.stderr).toBe(0)
      expect(run.stderr).toContain('SIGTERM')
      const pids = [...new Set([...JSON.stringify(run.frames).matchAll(/shell pid (\d+)/g)].map((match) => Number(match[1])))]
      expect(pids).toHaveLength(1)
      expect(alive(pids[0]!)).toBe(false)
      expect(processesIn(workspace)).toEqual([])
    } finally {
      rmSync(workspace, { recursive: true, force: true })
    }
  })
})
