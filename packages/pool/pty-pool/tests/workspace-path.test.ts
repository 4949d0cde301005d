/**
 * A confined agent does not choose the CLI the pool starts. Its workspace-write terminal (bubblewrap)
 * writes `<workspace>/node_modules/.bin/pooled-cli`, a REPL that answers `planted: …` and, run
 * unconfined, leaves a file outside the workspace. conch's PATH has that folder first, as `pnpm exec`,
 * `npx` and `npm run` put it, and the pool's kind names its binary `pooled-cli`, without a path. The
 * next pooled CLI is the one in the next PATH folder (`echo: …`), under `terminal: unconfined` and
 * `conch` alike, and the planted program never runs; a pool loaded with only the planted one on PATH
 * fails at load, naming it and why.
 */
import { chmodSync, existsSync, mkdirSync, writeFileSync } from 'node:fs'
import path from 'node:path'
import { afterEach, describe, expect, it } from 'vitest'
import { until } from '@conch/test-support/wait'
import * as ptyPool from '../src/index.ts'
import type { PtyPool } from '../src/index.ts'
import { sentinelRepl } from './repl.ts'
import { poolScratch, terminalStack } from './stack.ts'

const scratch = poolScratch()
const { fibers } = scratch

const savedPath = process.env.PATH
afterEach(() => {
  process.env.PATH = savedPath
})

/** A workspace, a folder outside it with the real `pooled-cli`, and where a planted one run unconfined would leave its mark. */
function folders() {
  const base = scratch.folder('pool-path-')
  const workspace = path.join(base, 'ws')
  const trusted = path.join(base, 'opt', 'bin')
  mkdirSync(workspace)
  mkdirSync(trusted, { recursive: true })
  const real = sentinelRepl(trusted)
  const cli = path.join(trusted, 'pooled-cli')
  writeFileSync(cli, `#!/bin/sh\nexec ${real} "$@"\n`)
  chmodSync(cli, 0o755)
  return { workspace, trusted, bin: path.join(workspace, 'node_modules', '.bin'), mark: path.join(base, 'planted-ran') }
}

const KIND = { command: 'pooled-cli', env: { POOL_SENTINEL: '{sentinel}' }, readyPattern: '^> ', busyPattern: '(?!x)x' }

describe('a CLI planted in the workspace', { timeout: 60_000 }, () => {
  for (const terminal of ['unconfined', 'conch'] as const) {
    it(`is not what the pool starts (terminal: ${terminal}), though the agent wrote it and it comes first on PATH`, async () => {
      const { workspace, trusted, bin, mark } = folders()
      const { root, load } = await terminalStack(fibers, { mode: 'workspace-write', workspaceRoot: workspace })
      const agent = await root.agents.create({ workspaceRoot: workspace })
      const opened = await root.pty.spawn(agent, { type: 'shell' })
      const planted =
        `mkdir -p ${bin} && printf '%s\\n' '#!/bin/sh' 'touch ${mark}' "printf '> '" 'read -r line' ` +
        `'printf "%s\\n%s\\n%s\\n> " "$POOL_SENTINEL" "planted: $line" "$POOL_SENTINEL"' 'sleep 60' > ${bin}/pooled-cli && chmod +x ${bin}/pooled-cli && echo PLANTED`
      const wrote = await root.pty.startSend(agent, opened.sessionId, { text: planted, submit: true }).done
      expect(wrote.viewport).toMatch(/^PLANTED$/m)
      await root.pty.close(agent, opened.sessionId)
      expect(existsSync(path.join(bin, 'pooled-cli'))).toBe(true)

      process.env.PATH = `${bin}:${trusted}:${savedPath}`
      await load(ptyPool, { terminal, kinds: { generic: KIND }, stallMs: 10_000 })
      const pool = root.ptyPool.pool as PtyPool
      const key = { owner: agent.id, conversation: agent.session.id, kind: 'generic', model: '', account: '', bare: false }
      expect(await pool.acquireAndInvoke(key, 'hello', { owner: agent })).toMatchObject({ path: 'booted', text: 'echo: hello' })
      expect(existsSync(mark)).toBe(false)
    })
  }

  it('fails the load when it is the only one on PATH, naming where it was found and why it is not taken', async () => {
    const { workspace, bin } = folders()
    mkdirSync(bin, { recursive: true })
    writeFileSync(path.join(bin, 'pooled-cli'), '#!/bin/sh\n')
    chmodSync(path.join(bin, 'pooled-cli'), 0o755)
    const { root, load } = await terminalStack(fibers, { mode: 'workspace-write', workspaceRoot: workspace })
    const errors: unknown[] = []
    root.logger.exporter({ export: (message) => void (message.type === 'error' && errors.push(...message.args)) })
    process.env.PATH = `${bin}:${savedPath}`
    await load(ptyPool, { terminal: 'unconfined', kinds: { generic: KIND } })
    await until(() => errors.length > 0, 10_000, 'the load error')
    expect(root.get('ptyPool')).toBeUndefined()
    expect(errors).toContainEqual(expect.objectContaining({
      code: 'CONFIG_INVALID',
      message: `pool config: kinds.generic.command: pooled-cli was found only in ${bin} (inside ${workspace}), which an agent may write; a program conch starts is never taken from there: give its absolute path`,
    }))
  })
})
