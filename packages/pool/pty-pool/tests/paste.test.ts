/**
 * How a prompt is typed, with real REPLs of the generic kind in real terminals: a shell loop that
 * answers, between two sentinel lines, whether the line it read arrived inside a bracketed paste
 * (`ESC[200~ … ESC[201~`, xterm's DECSET 2004) or as typed keys. The kind's `paste: always` sends
 * a single line as a paste while the REPL has DECSET 2004 on, and types it when the REPL has it
 * off; the default (`multi-line`) types a single line.
 */
import { chmodSync, writeFileSync } from 'node:fs'
import { describe, expect, it } from 'vitest'
import { tempDir } from '@conch/test-support/products'
import { BUILTIN_KINDS, loadPoolConfig, PtyPool, type PoolKey } from '../src/index.ts'
import { unconfinedTerminals } from './stack.ts'

const dir = tempDir('pool-paste-')
const terminals = unconfinedTerminals()

/** A REPL that turns DECSET 2004 on (`on`) or leaves it off, and reports how each line arrived. */
function repl(name: string, bracketed: boolean): string {
  const path = `${dir}/${name}.sh`
  writeFileSync(path, `#!/bin/sh
esc=$(printf '\\033')
prompt() { ${bracketed ? "printf '%s[?2004h' \"$esc\"; " : ''}printf '> '; }
prompt
while IFS= read -r line; do
  case "$line" in
    *"$esc[200~"*) how=pasted ;;
    *) how=typed ;;
  esac
  text=$(printf '%s' "$line" | sed "s/$esc\\[20[01]~//g")
  printf '%s\\n%s\\n%s\\n' "$POOL_SENTINEL" "$how: $text" "$POOL_SENTINEL"
  prompt
done
`)
  chmodSync(path, 0o755)
  return path
}

const key: PoolKey = { owner: 'a', conversation: 'c', kind: 'generic', model: '', account: '', bare: false }

function makePool(name: string, command: string, paste?: 'always' | 'multi-line') {
  const config = loadPoolConfig({
    terminal: 'unconfined',
    kinds: { generic: { command, env: { POOL_SENTINEL: '{sentinel}' }, readyPattern: '^> ', busyPattern: '(?!x)x', ...(paste && { paste }) } },
    stateDir: `${dir}/${name}/state`,
    cwd: dir,
  }, {}, BUILTIN_KINDS)
  return new PtyPool(config, { terminals, env: { PATH: process.env.PATH ?? '/usr/bin:/bin' }, fallback: async ({ prompt }) => `fresh: ${prompt}` })
}

describe('how a prompt is typed', { timeout: 30_000 }, () => {
  it('paste: always sends a single line as one bracketed paste while the CLI has DECSET 2004 on', async () => {
    const pool = makePool('always', repl('bracketed', true), 'always')
    try {
      const first = await pool.acquireAndInvoke(key, 'Q1: one line')
      const second = await pool.acquireAndInvoke(key, 'Q2: another line')
      expect([first.text, second.text]).toEqual(['pasted: Q1: one line', 'pasted: Q2: another line'])
      expect([first.path, second.path]).toEqual(['booted', 'warm'])
      expect(pool.readFailures()).toEqual([])
    } finally {
      await pool.shutdown()
    }
  })

  it('paste: always types the line when the CLI has DECSET 2004 off', async () => {
    const pool = makePool('off', repl('plain', false), 'always')
    try {
      expect((await pool.acquireAndInvoke(key, 'Q3: typed anyway')).text).toBe('typed: Q3: typed anyway')
    } finally {
      await pool.shutdown()
    }
  })

  it('the default types a single line, even with DECSET 2004 on', async () => {
    const pool = makePool('default', repl('bracketed-default', true))
    try {
      expect((await pool.acquireAndInvoke(key, 'Q4: keys')).text).toBe('typed: Q4: keys')
    } finally {
      await pool.shutdown()
    }
  })
})

describe('a prompt that carries control characters', { timeout: 30_000 }, () => {
  it('cannot close the paste early and type the rest as keys', async () => {
    const pool = makePool('escape', repl('bracketed-escape', true), 'always')
    try {
      // Unfiltered, ESC[201~ would end the paste there and the rest (an 8-bit CSI sequence too)
      // would arrive as typed keys.
      const first = await pool.acquireAndInvoke(key, 'Q5: before\u001b[201~INJECTED\u009b2J')
      const second = await pool.acquireAndInvoke(key, 'Q6: next')
      expect([first.text, second.text]).toEqual(['pasted: Q5: before[201~INJECTED2J', 'pasted: Q6: next'])
      expect(pool.readFailures()).toEqual([])
    } finally {
      await pool.shutdown()
    }
  })

  it('cannot send the line a SIGINT or submit early when typed', async () => {
    const pool = makePool('typed-controls', repl('plain-controls', false))
    try {
      // Unfiltered, ETX is the terminal's INTR character (termios(3)) and the REPL would die; a
      // CR would submit "Q7: ab" alone. The CR is a line break, which a typed line turns into a space.
      const first = await pool.acquireAndInvoke(key, 'Q7: a\u0003b\rc')
      const second = await pool.acquireAndInvoke(key, 'Q8: still here')
      expect([first.text, second.text]).toEqual(['typed: Q7: ab c', 'typed: Q8: still here'])
      expect([first.path, second.path]).toEqual(['booted', 'warm'])
    } finally {
      await pool.shutdown()
    }
  })
})

describe('the built-in kinds', () => {
  it('Codex gets every prompt as a paste; Claude Code types single lines', () => {
    const config = loadPoolConfig({}, {}, BUILTIN_KINDS)
    expect(config.kinds.codex!.paste).toBe('always')
    expect(config.kinds.claude!.paste).toBe('multi-line')
  })
})
