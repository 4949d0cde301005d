/**
 * The answer is taken when the CLI writes its transcript, not at the next tick: a real REPL of the
 * generic kind with a `claude-jsonl` transcript draws each answer's sentinel pair and only later
 * appends the same answer to its transcript, as Claude Code does. The pool's interval timers are
 * frozen and the quiet window is longer than the test, so after the pair is drawn nothing but
 * the transcript's write can wake the check: the invoke must end with the transcript's text.
 */
import { chmodSync, writeFileSync } from 'node:fs'
import { afterEach, describe, expect, it, vi } from 'vitest'
import { tempDir } from '@conch/test-support/products'
import { BUILTIN_KINDS, loadPoolConfig, PtyPool, type PoolKey } from '../src/index.ts'
import { unconfinedTerminals } from './stack.ts'

const dir = tempDir('pool-transcript-wake-')
const terminals = unconfinedTerminals()

/**
 * Answers `echo: <line>` between two sentinel lines, then appends the same answer to `$T` as a
 * Claude Code transcript entry: the first answer before it is drawn (so the transcript exists),
 * every later one after the screen is final.
 */
function repl(): string {
  const path = `${dir}/repl.sh`
  writeFileSync(path, `#!/bin/sh
record() { mkdir -p "\${T%/*}"; printf '{"type":"assistant","message":{"content":[{"type":"text","text":"%s\\\\n%s\\\\n%s"}]}}\\n' "$POOL_SENTINEL" "echo: $1" "$POOL_SENTINEL" >> "$T"; }
printf '> '
turn=0
while IFS= read -r line; do
  turn=$((turn + 1))
  if [ "$turn" = 1 ]; then record "$line"; fi
  printf '%s\\n%s\\n%s\\n> ' "$POOL_SENTINEL" "echo: $line" "$POOL_SENTINEL"
  if [ "$turn" != 1 ]; then sleep 0.3; record "$line"; fi
done
`)
  chmodSync(path, 0o755)
  return path
}

/**
 * Never draws an answer: each turn shows a busy row on the first row, appends a Claude Code `Stop`
 * record of `echo: <line>` to `$T` (the second turn only after 0.3 s, so the first turn's record is
 * the newest meanwhile), stays busy 0.3 s more, as Claude Code does while its hook runs, then
 * clears the busy row and shows a prompt. A line whose Enter came while it was busy is recorded
 * as `early: <line>`.
 */
function stopRepl(): string {
  const path = `${dir}/stop-repl.sh`
  writeFileSync(path, `#!/bin/bash
printf '\\n> '
turn=0
early=0
while IFS= read -r line; do
  turn=$((turn + 1))
  printf '\\0337\\033[1;1H\\033[2Kworking (esc to interrupt)\\0338'
  if [ "$turn" = 2 ]; then sleep 0.3; fi
  tag=echo
  if [ "$early" = 1 ]; then tag=early; fi
  printf '{"hook_event_name":"Stop","last_assistant_message":"%s\\\\n%s\\\\n%s"}\\n' "$POOL_SENTINEL" "$tag: $line" "$POOL_SENTINEL" >> "$T"
  sleep 0.3
  early=0
  if read -t 0; then early=1; fi
  printf '\\0337\\033[1;1H\\033[2K\\0338\\n> '
done
`)
  chmodSync(path, 0o755)
  return path
}

const key: PoolKey = { owner: 'a', conversation: 'c', kind: 'generic', model: '', account: '', bare: false }

afterEach(() => {
  vi.useRealTimers()
})

describe('the transcript wakes the answer check', { timeout: 30_000 }, () => {
  it('takes a warm answer when the transcript is written, with no tick and no quiet window', async () => {
    const pool = new PtyPool(
      loadPoolConfig({
        terminal: 'unconfined',
        settleMs: 600_000,
        kinds: {
          generic: {
            command: repl(),
            env: { POOL_SENTINEL: '{sentinel}', T: '{home}/projects/workspace/session.jsonl' },
            readyPattern: '^> ',
            busyPattern: '(?!x)x',
            transcript: { format: 'claude-jsonl', dir: '{home}/projects' },
          },
        },
        stateDir: `${dir}/state`,
        cwd: dir,
      }, {}, BUILTIN_KINDS),
      { terminals, env: { PATH: process.env.PATH ?? '/usr/bin:/bin' }, fallback: async ({ prompt }) => `fresh: ${prompt}` },
    )
    try {
      vi.useFakeTimers({ toFake: ['setInterval', 'clearInterval'] })
      const first = await pool.acquireAndInvoke(key, 'Q1: written first')
      const second = await pool.acquireAndInvoke(key, 'Q2: written after the screen')
      expect([first.path, second.path]).toEqual(['booted', 'warm'])
      expect([first.source, second.source]).toEqual(['transcript', 'transcript'])
      expect(second.text).toBe('echo: Q2: written after the screen')
      expect(pool.readFailures()).toEqual([])
    } finally {
      vi.useRealTimers()
      await pool.shutdown()
    }
  })

  it('takes the answer from a turn-end record (claude-stop) with no pair on the screen, never an earlier turn\'s, and presses Enter only on an idle screen', async () => {
    const pool = new PtyPool(
      loadPoolConfig({
        terminal: 'unconfined',
        settleMs: 600_000,
        kinds: {
          generic: {
            command: stopRepl(),
            env: { POOL_SENTINEL: '{sentinel}', T: '{home}/stop/stop.jsonl' },
            files: { 'stop/stop.jsonl': '' },
            readyPattern: '^> ',
            busyPattern: 'esc to interrupt',
            transcript: { format: 'claude-stop', dir: '{home}/stop' },
          },
        },
        stateDir: `${dir}/stop-state`,
        cwd: dir,
      }, {}, BUILTIN_KINDS),
      { terminals, env: { PATH: process.env.PATH ?? '/usr/bin:/bin' }, fallback: async ({ prompt }) => `fresh: ${prompt}` },
    )
    try {
      const first = await pool.acquireAndInvoke(key, 'Q1: the first turn')
      const second = await pool.acquireAndInvoke(key, 'Q2: recorded late')
      expect([first.path, second.path]).toEqual(['booted', 'warm'])
      expect([first, second].map((result) => [result.text, result.source])).toEqual([['echo: Q1: the first turn', 'transcript'], ['echo: Q2: recorded late', 'transcript']])
      expect(pool.readFailures()).toEqual([])
    } finally {
      await pool.shutdown()
    }
  })
})
