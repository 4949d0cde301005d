/**
 * What the host does inside a pooled CLI's home, against a CLI that plants things there, for real:
 * the pool plugin with ctx.agents, ctx.pty + pty-local and bubblewrap (workspace-write), in both
 * worker modes, running a REPL of the generic kind whose `RUN <script>` lines run in its sandbox,
 * where its home is writable. The CLI links the names the host would write a long prompt to at a
 * host file, replaces its prompt folder with a link to a host folder, links its transcript (or its
 * transcript folder) at a host transcript, links the failure log in its workspace at a host file,
 * and plants a 400 MB sparse transcript without a line end. The host writes through none of the
 * links, reads through none of them, and reads the huge transcript a bounded piece at a time.
 */
import { chmodSync, mkdirSync, readdirSync, readFileSync, writeFileSync } from 'node:fs'
import path from 'node:path'
import { describe, expect, it } from 'vitest'
import { DEFAULT_DENY_WRITE } from '@conch/sandbox-local'
import { carrying, tagOf } from '@conch/test-support/procs'
import { CONCH_BIN, tempDir } from '@conch/test-support/products'
import * as ptyPool from '../src/index.ts'
import type { PoolKey, PtyPool, WorkerSupervisor } from '../src/index.ts'
import { poolScratch, terminalStack } from './stack.ts'

const scratch = poolScratch()
const { fibers, made } = scratch

/**
 * A REPL of the generic kind: `RUN <script>` answers the script's output, a prompt sent through a
 * file (`Read the file F in full …`) answers `file: ` and the file's first 40 bytes, anything else
 * `echo: <line>` — each between sentinel lines. `$REPL_PID` is its own pid.
 */
function repl(dir: string): string {
  const file = path.join(dir, 'repl.sh')
  writeFileSync(file, `#!/bin/sh
export REPL_PID=$$
printf '> '
while IFS= read -r line; do
  case "$line" in
    RUN*) out=$(sh -c "\${line#RUN }" 2>&1 | tr '\\n' ' ') ;;
    "Read the file "*) f=\${line#Read the file }; f=\${f%% in full*}; out="file: $(head -c 40 "$f")" ;;
    *) out="echo: $line" ;;
  esac
  printf '%s\\n%s\\n%s\\n> ' "$POOL_SENTINEL" "$out" "$POOL_SENTINEL"
done
`)
  chmodSync(file, 0o755)
  return file
}

type Worker = 'in-process' | 'managed'

/** The composition, with the state home and the host's own files in a folder outside /tmp. */
async function compose(worker: Worker, transcript: boolean) {
  const base = scratch.folder('pool-links-')
  const ws = path.join(base, 'ws')
  const host = path.join(base, 'host')
  mkdirSync(ws)
  mkdirSync(host)
  scratch.stateHome(path.join(base, 'state'))
  const dir = tempDir('pool-links-')
  made.push(dir)
  const { root, load } = await terminalStack(fibers, { mode: 'workspace-write', workspaceRoot: ws })
  await load(ptyPool, {
    worker,
    ...(worker === 'managed' && { supervisor: { command: [process.execPath, CONCH_BIN, 'pool-worker'], backoffMs: 50 } }),
    kinds: {
      generic: {
        command: repl(dir),
        env: { POOL_SENTINEL: '{sentinel}', HOME: '{home}' },
        readyPattern: '^> ',
        busyPattern: '(?!x)x',
        ...(transcript && { transcript: { format: 'claude-jsonl', dir: '{home}/.claude/projects' } }),
      },
    },
    cwd: ws,
    stallMs: 20_000,
  })
  const owner = await root.agents.create({ workspaceRoot: ws })
  const pool = root.ptyPool.pool as PtyPool
  const key: PoolKey = { owner: owner.id, conversation: owner.session.id, kind: 'generic', model: '', account: '', bare: false }
  const invoke = (prompt: string) => pool.acquireAndInvoke(key, prompt, { owner })
  return { pool, host, ws, invoke }
}

/** The peak resident set (VmHWM, KiB) of the process doing the host's reads. */
function peakKiB(pool: PtyPool, worker: Worker): number {
  if (worker === 'in-process') return process.resourceUsage().maxRSS
  // The worker's node processes (a launcher may exec another): the highest peak among them.
  const tag = tagOf((pool.backend as WorkerSupervisor).workerPid()!)
  let peak = 0
  for (const pid of carrying(tag)) {
    try {
      if (!readFileSync(`/proc/${pid}/cmdline`, 'utf8').includes('pool-worker')) continue
      const hwm = /VmHWM:\s+(\d+)/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))
      if (hwm) peak = Math.max(peak, Number(hwm[1]))
    } catch {
      // gone
    }
  }
  return peak
}

const LONG = 'PROMPT-BODY ' + 'A'.repeat(900)

for (const worker of ['in-process', 'managed'] as const) {
  describe(`the host in a pooled CLI's home (${worker})`, { timeout: 120_000 }, () => {
    it('never writes a long prompt through a link the CLI planted at a prompt file name', async () => {
      const { host, invoke } = await compose(worker, false)
      const victim = path.join(host, 'victim.txt')
      writeFileSync(victim, 'ORIGINAL\n')
      // The names the host used to write turn N's prompt to, and a few more, all linked at the victim.
      const planted = await invoke(`RUN mkdir -p $HOME/prompts && for n in 1 2 3 4; do ln -s ${victim} $HOME/prompts/prompt-$n.md; done; ls $HOME/prompts | wc -l`)
      expect(planted.text.trim()).toBe('4')
      const answer = await invoke(LONG)
      // The prompt still reached the CLI, through a file of a fresh name.
      expect(answer.text).toBe(`file: ${LONG.slice(0, 40)}`)
      expect(answer.fallback).toBeUndefined()
      expect(readFileSync(victim, 'utf8')).toBe('ORIGINAL\n')
    })

    it('never writes into a host folder that the CLI put in place of its prompt folder', async () => {
      const { host, invoke } = await compose(worker, false)
      const target = path.join(host, 'prompts')
      mkdirSync(target)
      await invoke(`RUN rm -rf $HOME/prompts; ln -s ${target} $HOME/prompts && echo linked`)
      // Refused before a byte is typed; without a fresh-spawn path configured the invoke fails and names the link.
      await expect(invoke(LONG)).rejects.toThrow(/prompts is a symbolic link/)
      expect(readdirSync(target)).toEqual([])
    })

    it('keeps the failure log in the state folder, where the CLI can plant no link, and writes nothing in the workspace', async () => {
      const { pool, host, ws, invoke } = await compose(worker, false)
      const victim = path.join(host, 'victim.txt')
      writeFileSync(victim, 'ORIGINAL\n')
      const log = pool.failuresFile()
      expect(path.dirname(log)).toBe(pool.stateDir)
      const planted = await invoke(`RUN ln -s ${victim} ${log} 2>/dev/null && echo linked || echo refused`)
      expect(planted.text.trim()).toBe('refused')
      // The CLI dies mid-turn: a pooled failure, whose line the host appends to the log.
      await expect(invoke('RUN kill -KILL $REPL_PID')).rejects.toThrow(/the pool failed \(unhealthy/)
      expect(readFileSync(victim, 'utf8')).toBe('ORIGINAL\n')
      expect(pool.readFailures()).toMatchObject([{ reason: 'unhealthy', fallback: 'failed' }])
      // The deny-write placeholders (empty folders while the sandbox lives, `.git` for `.git/hooks/`
      // in a workspace that has none) are the sandbox's, not the CLI's.
      const placeholders = new Set(DEFAULT_DENY_WRITE.map((entry) => entry.split('/')[0]!))
      expect(readdirSync(ws).filter((name) => !(placeholders.has(name) && readdirSync(path.join(ws, name)).length === 0))).toEqual([])
    })

    for (const plant of ['file', 'folder'] as const) {
      it(`never reads a host transcript through a link at the transcript ${plant}`, async () => {
        const { host, invoke } = await compose(worker, true)
        // The sentinel, with its angle brackets swapped so that it does not frame this answer.
        const shown = await invoke(`RUN printf %s "$POOL_SENTINEL" | tr '<>' '[]'`)
        const sentinel = shown.text.trim().replace(/\[/g, '<').replace(/\]/g, '>')
        expect(sentinel).toMatch(/^<<<CONCH-[0-9a-f]{8}>>>$/)
        // A host transcript whose last answer is exactly what the next turn shows on the screen.
        const projects = path.join(host, 'projects')
        mkdirSync(path.join(projects, 'p'), { recursive: true })
        const hostTranscript = path.join(projects, 'p', 'host.jsonl')
        writeFileSync(hostTranscript, `${JSON.stringify({ type: 'assistant', message: { content: [{ type: 'text', text: `${sentinel}\n**echo: the-next-turn**\n${sentinel}` }] } })}\n`)
        await invoke(
          plant === 'file'
            ? `RUN mkdir -p $HOME/.claude/projects/p && ln -s ${hostTranscript} $HOME/.claude/projects/p/t.jsonl && echo linked`
            : `RUN mkdir -p $HOME/.claude && rm -rf $HOME/.claude/projects && ln -s ${projects} $HOME/.claude/projects && echo linked`,
        )
        const answer = await invoke('the-next-turn')
        // Read through the link, the host's file would have been the answer (markdown kept).
        expect(answer.text).toBe('echo: the-next-turn')
        expect(answer.source).toBe('screen')
      })
    }

    it('reads a 400 MB sparse transcript without a line end a bounded piece at a time', async () => {
      const { pool, invoke } = await compose(worker, true)
      const planted = await invoke('RUN mkdir -p $HOME/.claude/projects/p && truncate -s 400M $HOME/.claude/projects/p/t.jsonl && echo planted')
      expect(planted.text.trim()).toBe('planted')
      const before = peakKiB(pool, worker)
      expect(before).toBeGreaterThan(0)
      for (const word of ['one', 'two', 'three']) {
        const answer = await invoke(word)
        expect(answer.text).toBe(`echo: ${word}`)
        expect(answer.source).toBe('screen')
      }
      // A whole read would hold the 400 MB (twice: bytes and string); a bounded one a few MiB.
      expect(peakKiB(pool, worker) - before).toBeLessThan(100 * 1024)
    })
  })
}
