import { randomBytes } from 'node:crypto'
import type { SessionTag } from './types.ts'

/** Substrings (matched case-insensitively) that make a variable name look like a secret. */
const SECRET_WORDS = ['KEY', 'PASSWORD', 'SECRET', 'TOKEN']

/** Prefix of conch's own variables (session tags and the like), never inherited by a child. */
const INTERNAL_PREFIX = 'CONCH_'

/**
 * The environment for a child derived from `parent`, without variables whose *name* looks like a
 * secret — containing KEY, PASSWORD, SECRET or TOKEN, case-insensitively (`GITHUB_TOKEN`,
 * `my_api_key`, but also `KEYBOARD_LAYOUT`) — and without conch's own `CONCH_*` variables.
 * Undefined values are dropped. Entries of `trusted` are added last and win, so a secret a
 * child needs can be passed on purpose.
 *
 * This is a heuristic over names: a secret under an innocent name (`DATABASE_URL` with a
 * password inside, `AWS_SESSION` …) passes through. Give children an explicit environment when
 * that matters.
 */
export function scrubbedEnv(
  parent: Readonly<Record<string, string | undefined>>,
  options: { trusted?: Readonly<Record<string, string>> } = {},
): Record<string, string> {
  const env: Record<string, string> = {}
  for (const [name, value] of Object.entries(parent)) {
    if (value === undefined) continue
    const upper = name.toUpperCase()
    if (upper.startsWith(INTERNAL_PREFIX)) continue
    if (SECRET_WORDS.some((word) => upper.includes(word))) continue
    env[name] = value
  }
  return Object.assign(env, options.trusted ?? {})
}

/** A fresh session tag under variable `name`: 128 random bits as 32 hex digits. */
export function createSessionTag(name: string): SessionTag {
  return { name, value: randomBytes(16).toString('hex') }
}
