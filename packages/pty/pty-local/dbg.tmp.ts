import { LocalBackend } from './src/backend.ts'
import { Config } from './src/config.ts'
import { linuxInspector } from './src/inspector.ts'
const backend = new LocalBackend({
  config: Config.parse({}),
  sandbox: {} as any,
  sandboxPolicy: { resolve: () => ({ mode: 'danger-full-access', workspaceRoot: '/tmp', sessionId: 's' }) } as any,
  inspect: (t) => linuxInspector({ pid: t.pid, rdev: t.slave.rdev, path: t.slavePath }),
})
for (let i = 0; i < 6; i++) {
  const s = await backend.spawn({ owner: { session: { id: 's' } } as any, sessionId: 'pty-1', signal: new AbortController().signal })
  const op = s.startSend({ text: 'sleep 100', submit: true })
  const sig = await s.signal('SIGINT')
  const r = await op.done
  const r2 = await s.startSend({ text: 'echo rc=$?', submit: true }).done
  console.log(JSON.stringify(sig), r.waitReason, JSON.stringify(r.viewport), JSON.stringify(r2.viewport))
  await s.close()
}
process.exit(0)
