import { readFileSync, readdirSync } from 'node:fs'
import { LocalBackend } from './src/backend.ts'
import { Config } from './src/config.ts'
import { linuxInspector } from './src/inspector.ts'
const backend = new LocalBackend({
  config: Config.parse({}),
  sandbox: {} as any,
  sandboxPolicy: { resolve: () => ({ mode: 'danger-full-access', workspaceRoot: '/tmp', sessionId: 's' }) } as any,
  inspect: (t) => linuxInspector({ pid: t.pid, rdev: t.slave.rdev, path: t.slavePath }),
})
const s = await backend.spawn({ owner: { session: { id: 's' } } as any, sessionId: 'pty-1', signal: new AbortController().signal })
await s.startSend({ text: 'node', submit: true }).done
const st = readFileSync(`/proc/${s.pid}/stat`, 'utf8'); const tpgid = Number(st.slice(st.lastIndexOf(')') + 2).split(' ')[5])
const sw = () => { const t = readFileSync(`/proc/${tpgid}/task/${tpgid}/status`, 'utf8'); return Number(/^voluntary_ctxt_switches:\s*(\d+)/m.exec(t)![1]) + Number(/^nonvoluntary_ctxt_switches:\s*(\d+)/m.exec(t)![1]) }
const sc = () => readFileSync(`/proc/${tpgid}/task/${tpgid}/syscall`, 'utf8').split(' ')[0]
for (let round = 0; round < 3; round++) {
  const op = s.startSend({ text: '1+1', submit: true })
  const t0 = performance.now(); const samples: string[] = []
  let last = sw()
  while (performance.now() - t0 < 250) { const v = sw(); if (v !== last) { samples.push(`${(performance.now()-t0).toFixed(1)}:${v - last}:${sc()}`); last = v } await new Promise(r => setImmediate(r)) }
  const r = await op.done
  console.log('elapsed', r.elapsedMs, r.evidence.tier, 'wakeups', samples.join(' '))
}
// threads
console.log(readdirSync(`/proc/${tpgid}/task`).length, 'threads')
await s.close(); process.exit(0)
