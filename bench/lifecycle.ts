/**
 * `lifecycle`: opening a session and closing one that runs background jobs, unconfined and under
 * bubblewrap, against a bare bash to its first prompt and SIGKILL to a tree whose pids are known.
 */
import type { Agent } from '../packages/core/agent/src/index.ts'
import * as sandboxLocal from '../packages/sandbox/sandbox-local/src/index.ts'
import { OWN_SANDBOX_TYPE, type Composition } from './compose.ts'
import { expectReady, PLAN, progress, timed } from './harness.ts'
import { descendantsOf, rawBash, waitGone } from './raw.ts'
import type { Bench } from './registry.ts'
import { median, percentile, ratio, round } from './stats.ts'
import { ms, x } from './table.ts'

export type LifecycleFigures = Awaited<ReturnType<typeof benchLifecycle>>

const SPAWN_DESCENDANTS = `for i in $(seq ${PLAN.descendants}); do sleep 1000 & done`

/** SIGKILL to `pid`, ignoring a process that is already gone. */
function killQuietly(pid: number): void {
  try {
    process.kill(pid, 'SIGKILL')
  } catch {
    // already gone
  }
}

async function benchLifecycle(c: Composition) {
  const conch = async (owner: Agent, label: string) => {
    const open: number[] = []
    const close: number[] = []
    const stopped: number[] = []
    for (let i = 0; i < PLAN.lifecycleRuns; i++) {
      const opened = await timed(() => c.ctx.pty.spawn(owner, { type: 'shell' }))
      const { sessionId } = opened.value
      open.push(opened.ms)
      let closed = false
      try {
        const { result } = await c.send(owner, sessionId, SPAWN_DESCENDANTS)
        expectReady(`lifecycle ${label}`, result, ['stdin_read', 'inferred_idle'])
        const { value: report, ms } = await timed(() => c.ctx.pty.close(owner, sessionId))
        close.push(ms)
        closed = true
        stopped.push(report.stopped.length)
        // The jobs were forked before the prompt came back; some may not have exec'd sleep yet.
        if (report.stopped.length < PLAN.descendants) {
          throw new Error(`lifecycle ${label}: the close stopped ${JSON.stringify(report.stopped)}, expected at least ${PLAN.descendants} processes`)
        }
      } finally {
        if (!closed) await c.ctx.pty.close(owner, sessionId).catch(() => {})
      }
    }
    progress(`lifecycle ${label}: open p50 ${round(median(open))} ms, close p50 ${round(median(close))} ms`)
    return { open, close, stopped }
  }
  const raw = async (wrap: ((argv: [string, ...string[]]) => [string, ...string[]]) | undefined, label: string) => {
    const open: number[] = []
    const close: number[] = []
    for (let i = 0; i < PLAN.lifecycleRuns; i++) {
      const terminal = rawBash({ cwd: c.workspace, ...(wrap ? { wrap } : {}) })
      try {
        open.push(await terminal.ready)
        await terminal.send(SPAWN_DESCENDANTS)
        const tree = [terminal.pid, ...descendantsOf(terminal.pid)]
        if (tree.length < PLAN.descendants + 1) throw new Error(`lifecycle ${label}: found ${tree.length - 1} descendants, expected at least ${PLAN.descendants}`)
        // The floor of a close: every process of the tree is already known; KILL them all and
        // wait until none runs. No discovery, no grace, no identity checks.
        const closeStart = performance.now()
        for (const pid of tree) killQuietly(pid)
        await waitGone(tree)
        close.push(performance.now() - closeStart)
      } finally {
        await terminal.destroy()
      }
    }
    progress(`lifecycle ${label}: open p50 ${round(median(open))} ms, close p50 ${round(median(close))} ms`)
    return { open, close }
  }
  // Opens in an agent's sandbox: the first terminal of a fresh agent (its sandbox made on the way),
  // then pairs of a later one and, its baseline, a terminal of the same agent in a sandbox of its
  // own (same policy, no agent: every open before the agent sandbox), in alternating order; each
  // agent ended after its terminals. A pair's difference (later − own) is measured under the same
  // load, so its median does not hinge on two medians of noisy runs.
  const agentOpens = async () => {
    const first: number[] = []
    const later: number[] = []
    const own: number[] = []
    for (let i = 0; i < PLAN.lifecycleRuns; i++) {
      const owner = await c.ctx.agents.create({ workspaceRoot: c.workspace })
      try {
        c.ctx.sandboxPolicy.setMode(owner.session, 'workspace-write')
        first.push((await timed(() => c.ctx.pty.spawn(owner, { type: 'shell' }))).ms)
        for (let pair = 0; pair < PLAN.laterPairs; pair++) {
          const then: Array<[number[], string]> = [[later, 'shell'], [own, OWN_SANDBOX_TYPE]]
          for (const [into, type] of (i + pair) % 2 === 0 ? then : then.reverse()) into.push((await timed(() => c.ctx.pty.spawn(owner, { type }))).ms)
        }
      } finally {
        await c.ctx.agents.dispose(owner)
      }
    }
    const difference = later.map((ms, pair) => ms - own[pair]!)
    progress(
      `lifecycle agent: first terminal open p50 ${round(median(first))} ms, later terminal ${round(median(later))} ms, own sandbox ${round(median(own))} ms, ` +
        `paired later − own p50 ${round(median(difference))} ms (later ≤ own in ${difference.filter((ms) => ms <= 0).length} of ${difference.length})`,
    )
    return { first, later, own, difference }
  }

  const policy = { mode: 'workspace-write' as const, workspaceRoot: c.workspace }
  const bwrap = sandboxLocal.bubblewrapProvider(sandboxLocal.Config.parse({}))
  // The argv ends with the command: confine a placeholder once, and put each command in its place.
  const wrapWith = (prefix: string[]) => (argv: [string, ...string[]]): [string, ...string[]] => [prefix[0]!, ...prefix.slice(1, -1), ...argv]
  const confine = wrapWith((await bwrap.confine(['true'], { ...policy, protectedPaths: [] })).argv)
  // The same in an agent's sandbox: entering its network namespace, its /tmp bound.
  const cleanups: Array<() => void | Promise<void>> = []
  const benchAgent = { key: 'bench-raw', owner: { onDispose: (cleanup: () => void | Promise<void>) => (cleanups.push(cleanup), () => {}) } }
  const joined = wrapWith((await bwrap.confine(['true'], { ...policy, protectedPaths: [], agent: benchAgent })).argv)

  const plain = await conch(c.agent, 'unconfined')
  const plainRaw = await raw(undefined, 'raw')
  const boxed = await conch(c.sandboxed, 'bubblewrap')
  const boxedRaw = await raw(confine, 'raw bubblewrap')
  const joinedRaw = await raw(joined, 'raw bubblewrap, joining an agent sandbox')
  for (const cleanup of cleanups) await cleanup()
  const agentOpen = await agentOpens()
  return {
    open_p50_ms: round(median(plain.open)),
    close_p50_ms: round(median(plain.close)),
    open_sandbox_p50_ms: round(median(boxed.open)),
    close_sandbox_p50_ms: round(median(boxed.close)),
    open_p95_ms: round(percentile(plain.open, 95)),
    close_p95_ms: round(percentile(plain.close, 95)),
    open_sandbox_p95_ms: round(percentile(boxed.open, 95)),
    close_sandbox_p95_ms: round(percentile(boxed.close, 95)),
    raw_open_p50_ms: round(median(plainRaw.open)),
    raw_close_p50_ms: round(median(plainRaw.close)),
    raw_open_sandbox_p50_ms: round(median(boxedRaw.open)),
    raw_close_sandbox_p50_ms: round(median(boxedRaw.close)),
    open_agent_first_p50_ms: round(median(agentOpen.first)),
    open_agent_later_p50_ms: round(median(agentOpen.later)),
    open_own_sandbox_p50_ms: round(median(agentOpen.own)),
    open_agent_later_minus_own_p50_ms: round(median(agentOpen.difference)),
    later_own_pairs: agentOpen.difference.length,
    raw_open_agent_p50_ms: round(median(joinedRaw.open)),
    stopped_p50: median(plain.stopped),
    stopped_sandbox_p50: median(boxed.stopped),
    runs: PLAN.lifecycleRuns,
    descendants: PLAN.descendants,
    raw_close_means: 'SIGKILL to every process of the bare tree (known in advance) until none runs (gone or a zombie)',
  }
}

export const lifecycleBench: Bench = {
  keys: ['lifecycle'],
  needs: [{ keys: ['lifecycle'], program: 'bwrap', args: ['--ro-bind', '/', '/', 'true'] }],
  async run(c) {
    progress(`lifecycle: ${PLAN.lifecycleRuns} opens and closes each, unconfined and under bubblewrap, conch and raw; opens in fresh agents' sandboxes`)
    return { lifecycle: await benchLifecycle(c!) }
  },
  rows(r, verdict) {
    const rows: string[][] = []
    if (r.lifecycle) {
      const l = r.lifecycle
      rows.push(['open p50', ms(l.open_p50_ms), `raw ${ms(l.raw_open_p50_ms)}`, x(ratio(l.open_p50_ms, l.raw_open_p50_ms)), ''])
      rows.push([`close p50 (${l.descendants} descendants)`, ms(l.close_p50_ms), `raw ${ms(l.raw_close_p50_ms)}`, x(ratio(l.close_p50_ms, l.raw_close_p50_ms)), ''])
      rows.push(['open p50, bubblewrap', ms(l.open_sandbox_p50_ms), `raw ${ms(l.raw_open_sandbox_p50_ms)}`, x(ratio(l.open_sandbox_p50_ms, l.raw_open_sandbox_p50_ms)), ''])
      rows.push(['close p50, bubblewrap', ms(l.close_sandbox_p50_ms), `raw ${ms(l.raw_close_sandbox_p50_ms)}`, x(ratio(l.close_sandbox_p50_ms, l.raw_close_sandbox_p50_ms)), ''])
      rows.push(["open p50, an agent's first terminal (its sandbox made)", ms(l.open_agent_first_p50_ms), `later ${ms(l.open_agent_later_p50_ms)}`, x(ratio(l.open_agent_first_p50_ms, l.open_agent_later_p50_ms)), ''])
      rows.push(["open p50, an agent's later terminal", ms(l.open_agent_later_p50_ms), `own sandbox ${ms(l.open_own_sandbox_p50_ms)}`, x(ratio(l.open_agent_later_p50_ms, l.open_own_sandbox_p50_ms)), ''])
      rows.push([`later − own sandbox, p50 of ${l.later_own_pairs} pairs`, ms(l.open_agent_later_minus_own_p50_ms), '', '', verdict('lifecycle.open_agent_later_minus_own_p50_ms')])
      rows.push(['raw open p50, joining an agent sandbox', ms(l.raw_open_agent_p50_ms), `own sandbox ${ms(l.raw_open_sandbox_p50_ms)}`, x(ratio(l.raw_open_agent_p50_ms, l.raw_open_sandbox_p50_ms)), verdict('lifecycle.raw_open_agent_p50_ms')])
    }
    return rows
  },
}
