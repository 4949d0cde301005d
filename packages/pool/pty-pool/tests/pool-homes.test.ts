/**
 * The private homes of pooled CLIs against the other owners' terminals, for real: the pool plugin
 * in a composition with ctx.agents, ctx.pty + pty-local and bubblewrap, in both worker modes, with
 * a REPL of the generic kind whose home holds a seeded `.claude/settings.json` (the file whose
 * hooks Claude Code runs) and a transcript. Owner B's CLI is booted; owner A's confined shell
 * (workspace-write and read-only, even with a workspace that holds the state folder) tries to
 * list the homes, read B's transcript and plant a hook in B's settings. B's CLI itself sees its own
 * home and no other. A shared temporary root is refused as a workspace.
 */
import { chmodSync, mkdirSync, readdirSync, readFileSync, statSync, writeFileSync } from 'node:fs'
import path from 'node:path'
import { Context } from 'cordis'
import { describe, expect, it } from 'vitest'
import type { Agent } from '@conch/agent'
import SubprocessService from '@conch/subprocess'
import { CONCH_BIN, tempDir } from '@conch/test-support/products'
import { until } from '@conch/test-support/wait'
import * as ptyPool from '../src/index.ts'
import { BUILTIN_KINDS, loadPoolConfig, PoolMetrics, WorkerSupervisor, type PtyPool } from '../src/index.ts'
import { poolScratch, terminalStack } from './stack.ts'

const SETTINGS = '{"permissions":{"allow":[]}}'
const HOOK = '{"hooks":{"SessionStart":[{"hooks":[{"type":"command","command":"touch /pwned"}]}]}}'

const scratch = poolScratch()
const { fibers, made } = scratch

/** A REPL of the generic kind: answers `echo: <line>`, or with the output of `RUN <script>`, between sentinel lines; writes a transcript line per turn. */
function repl(dir: string): string {
  const file = path.join(dir, 'repl.sh')
  writeFileSync(file, `#!/bin/sh
printf '> '
while IFS= read -r line; do
  echo "{\\"said\\":\\"secret transcript of $POOL_OWNER\\"}" >> "$HOME/transcript.jsonl"
  case "$line" in
    RUN*) out=$(sh -c "\${line#RUN }" 2>&1 | tr '\\n' ' ') ;;
    *) out="echo: $line" ;;
  esac
  printf '%s\\n%s\\n%s\\n> ' "$POOL_SENTINEL" "$out" "$POOL_SENTINEL"
done
`)
  chmodSync(file, 0o755)
  return file
}

/**
 * The composition; the state home (`XDG_STATE_HOME`, so the pool's default `stateDir`) is
 * `<A's workspace>/.state` when `stateInWorkspace`, else a folder of its own. Folders outside /tmp,
 * which each sandbox replaces with a private one.
 */
async function compose(options: { worker: 'in-process' | 'managed'; stateInWorkspace: boolean }) {
  const base = scratch.folder('pool-homes-')
  const wsA = path.join(base, 'a')
  const wsB = path.join(base, 'b')
  mkdirSync(wsA)
  mkdirSync(wsB)
  scratch.stateHome(options.stateInWorkspace ? path.join(wsA, '.state') : path.join(base, 'state'))
  const dir = tempDir('pool-homes-')
  made.push(dir)
  const { root, load } = await terminalStack(fibers, { mode: 'workspace-write', workspaceRoot: wsA })
  await load(ptyPool, {
    worker: options.worker,
    ...(options.worker === 'managed' && { supervisor: { command: [process.execPath, CONCH_BIN, 'pool-worker'], backoffMs: 50 } }),
    kinds: {
      generic: {
        command: repl(dir),
        env: { POOL_SENTINEL: '{sentinel}', HOME: '{home}' },
        files: { '.claude/settings.json': SETTINGS },
        readyPattern: '^> ',
        busyPattern: '(?!x)x',
      },
    },
    cwd: wsB,
    stallMs: 10_000,
  })
  const a = await root.agents.create({ workspaceRoot: wsA })
  const b = await root.agents.create({ workspaceRoot: wsB })
  const pool = root.ptyPool.pool as PtyPool
  return { root, pool, a, b, stateDir: pool.stateDir }
}

const keyOf = (agent: Agent) => ({ owner: agent.id, conversation: agent.session.id, kind: 'generic', model: '', account: '', bare: false })

/** Runs `script` in a confined shell terminal of `owner` and returns what it printed. */
async function inShell(root: Context, owner: Agent, script: string): Promise<string> {
  const opened = await root.pty.spawn(owner, { type: 'shell' })
  try {
    const result = await root.pty.startSend(owner, opened.sessionId, { text: `${script}; echo END-OF-ATTACK`, submit: true }).done
    expect(result.viewport).toMatch(/^END-OF-ATTACK$/m)
    return result.viewport
  } finally {
    await root.pty.close(owner, opened.sessionId)
  }
}

function homeOf(stateDir: string): string {
  const homes = readdirSync(stateDir).filter((name) => name.startsWith('home-'))
  expect(homes).toHaveLength(1)
  return path.join(stateDir, homes[0]!)
}

for (const worker of ['in-process', 'managed'] as const) {
  describe(`pooled CLI homes (${worker})`, { timeout: 90_000 }, () => {
    for (const [mode, stateInWorkspace] of [['workspace-write', false], ['workspace-write', true], ['read-only', false]] as const) {
      it(`another owner's ${mode} terminal cannot list, read or rewrite them${stateInWorkspace ? ', even with the state folder inside its workspace' : ''}`, async () => {
        const { root, pool, a, b, stateDir } = await compose({ worker, stateInWorkspace })
        expect(stateDir).toBe(path.join(process.env.XDG_STATE_HOME!, 'conch', 'pool'))
        expect(statSync(stateDir).mode & 0o777).toBe(0o700)
        expect(await pool.acquireAndInvoke(keyOf(b), 'hello', { owner: b })).toMatchObject({ path: 'booted', text: 'echo: hello' })
        const home = homeOf(stateDir)
        expect(statSync(home).mode & 0o777).toBe(0o700)
        const settings = path.join(home, '.claude', 'settings.json')
        expect(readFileSync(settings, 'utf8')).toBe(SETTINGS)
        if (mode === 'read-only') root.sandboxPolicy.setMode(a.session, 'read-only')

        const seen = await inShell(
          root,
          a,
          `echo "list=[$(ls -A ${stateDir} 2>&1)]"; cat ${home}/transcript.jsonl ${settings} 2>/dev/null; echo "read=$?"; ` +
            `echo '${HOOK}' > ${settings}; echo "write=$?"; rm -rf ${home} 2>/dev/null; echo "rm=$?"; mv ${stateDir} ${stateDir}.old 2>/dev/null; echo "mv=$?"`,
        )
        expect(seen).toMatch(/^list=\[\]$/m)
        expect(seen).toMatch(/^read=1$/m)
        expect(seen).toMatch(/^write=[1-9]\d*$/m)
        expect(seen).not.toContain('secret transcript')
        expect(seen).not.toContain('permissions')
        expect(readFileSync(settings, 'utf8')).toBe(SETTINGS)
        expect(readdirSync(stateDir)).toEqual([path.basename(home)])

        // B's CLI still works, sees its own home (and writes it), and no other home.
        expect(await pool.acquireAndInvoke(keyOf(b), 'RUN cat $HOME/.claude/settings.json; echo; ls -A $HOME/..', { owner: b })).toMatchObject({
          path: 'warm',
          text: `${SETTINGS} ${path.basename(home)}`,
        })
        expect(readFileSync(path.join(home, 'transcript.jsonl'), 'utf8')).toContain('secret transcript')
        expect(pool.readFailures()).toEqual([])
      })
    }

    it('a second owner’s pooled CLI sees its own home and not the first one’s', async () => {
      const { pool, a, b, stateDir } = await compose({ worker, stateInWorkspace: false })
      expect(await pool.acquireAndInvoke(keyOf(b), 'hello', { owner: b })).toMatchObject({ path: 'booted' })
      const homeB = homeOf(stateDir)
      const answer = await pool.acquireAndInvoke(keyOf(a), `RUN ls -A ${stateDir}; cat ${homeB}/.claude/settings.json ${homeB}/transcript.jsonl; echo "read=$?"; echo x > ${homeB}/.claude/settings.json; echo "write=$?"`, { owner: a })
      expect(answer.path).toBe('booted')
      const homeA = readdirSync(stateDir).filter((name) => name !== path.basename(homeB))
      expect(homeA).toHaveLength(1)
      expect(answer.text).toMatch(new RegExp(`^${homeA[0]} .*read=1 .*write=[1-9]\\d*$`))
      expect(answer.text).not.toContain('secret transcript')
      expect(readFileSync(path.join(homeB, '.claude', 'settings.json'), 'utf8')).toBe(SETTINGS)
    })
  })
}

describe('a shared temporary root as a workspace', { timeout: 30_000 }, () => {
  it('is refused when a confined terminal opens there, naming the folder', async () => {
    const { root, load } = await terminalStack(fibers, { mode: 'workspace-write' })
    for (const workspace of ['/tmp', '/var/tmp', '/dev/shm']) {
      const agent = await root.agents.create({ workspaceRoot: workspace })
      for (const mode of ['workspace-write', 'read-only'] as const) {
        root.sandboxPolicy.setMode(agent.session, mode)
        await expect(root.pty.spawn(agent, { type: 'shell' })).rejects.toMatchObject({ message: expect.stringContaining(`${workspace} is a temporary folder every user shares`) })
      }
      expect(root.pty.list(agent)).toEqual([])
    }
  })
})

describe('a managed worker', { timeout: 60_000 }, () => {
  it('checks the state folder again, and does not start on one directly in /tmp', async () => {
    const root = new Context()
    fibers.push(await root.plugin(SubprocessService, SubprocessService.Config.parse({})))
    const warnings: string[] = []
    const config = loadPoolConfig({ worker: 'managed', terminal: 'unconfined', supervisor: { command: [process.execPath, CONCH_BIN, 'pool-worker'], backoffMs: 50 } }, {}, BUILTIN_KINDS)
    // As a main process that skipped its own check would send it.
    const supervisor = new WorkerSupervisor({ ...config, stateDir: '/tmp/conch-pool' }, { subprocess: root.subprocess, env: {}, metrics: new PoolMetrics(), warn: (line) => warnings.push(line) })
    try {
      await until(() => warnings.some((line) => line.includes('stateDir: /tmp/conch-pool lies directly in /tmp')), 30_000, 'the worker to refuse its state folder')
      expect(supervisor.state).not.toBe('ready')
    } finally {
      await supervisor.close()
    }
  })
})
