/**
 * CPU of this process while a send waits on a foreground program with many threads: the cost
 * of the /proc probes (docs/performance.md, "Probes of programs with many threads").
 *
 * Starts one unconfined local session, runs a python3 program with N threads parked in a wait
 * that prints a token and then sleeps (never reading the terminal, never printing), and measures
 * process.cpuUsage() over 5 s while the send waits. Not a test: no threshold.
 *
 * Run: pnpm exec tsx packages/pty/pty-local/bench/probe-threads.ts [threads]
 */
import { LocalBackend } from '../src/backend.ts'
import { Config } from '../src/config.ts'
import { linuxInspector } from '../src/inspector.ts'
const threads = Number(process.argv[2] ?? 1000)
const config = Config.parse({ idleSilenceMs: 60000, timeoutMs: 60000 })
const backend = new LocalBackend({
  config,
  sandbox: { confine: () => Promise.reject(new Error('no')) } as never,
  sandboxPolicy: { resolve: () => ({ mode: 'danger-full-access', workspaceRoot: process.cwd(), sessionId: 's' }) } as never,
  inspect: (t) => linuxInspector({ pid: t.pid, ...t.slave, path: t.slavePath }),
})
const session = await backend.spawn({ owner: { id: 'a', session: { id: 's' } } as never, sessionId: 'x', signal: new AbortController().signal })
const op = session.startSend({ text: `python3 -c 'import threading,time; ev=threading.Event(); [threading.Thread(target=ev.wait,daemon=True).start() for _ in range(${threads})]; print("THREADS-UP", flush=True); time.sleep(600)'`, submit: true })
await new Promise<void>((resolve) => { const off = op.onOutput(() => { if (op.readOutput().includes('THREADS-UP')) { off(); resolve() } }) })
await new Promise((r) => setTimeout(r, 1000))
const before = process.cpuUsage(); const t0 = performance.now()
await new Promise((r) => setTimeout(r, 5000))
const used = process.cpuUsage(before); const wall = performance.now() - t0
console.log(`threads=${threads} cpu=${((used.user + used.system) / 1000 / wall * 100).toFixed(1)}% of a core while the send waits`)
await op.cancel(); await op.done.catch(() => {})
await session.close()
process.exit(0)
