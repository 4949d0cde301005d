/**
 * Environment variables in config values, so a secret never sits in a yml. Inside any string
 * of an enabled entry's `config` (at any depth):
 *
 * - `${NAME}`: the variable's value; an unset variable is an error.
 * - `${NAME:-default}`: the value, or `default` when the variable is unset or empty.
 * - `${NAME-default}`: the value, or `default` when the variable is unset.
 * - `$$`: a literal `$`.
 *
 * The forms follow POSIX shell parameter expansion (XCU 2.6.2) — a subset, with no nesting.
 * Substitution yields strings only; a field that needs a number must be written as one.
 */
import type { EntryRow } from './compose.ts'
import { display } from './compose.ts'
import { CliError } from './errors.ts'

const REFERENCE = /\$(?:\$|\{([^}]*)\})/g
const NAME_AND_DEFAULT = /^([A-Za-z_][A-Za-z0-9_]*)(?:(:?-)(.*))?$/s

/**
 * Replaces references in the config of every enabled row (disabled rows are left as written,
 * so a disabled live model does not need its key).
 * @throws CliError `MISSING_ENV` naming the variable, the entry id, the field and the file;
 *   `CONFIG_INVALID` for a malformed `${…}`.
 */
export function interpolateEnv(entries: readonly EntryRow[], env: NodeJS.ProcessEnv): EntryRow[] {
  return entries.map((row) => {
    if (row.disabled) return row
    const copy: EntryRow = { ...row }
    if (row.children) copy.children = interpolateEnv(row.children, env)
    if (row.config !== undefined) copy.config = substitute(row.config, env, { row, path: ['config'] })
    return copy
  })
}

interface Where {
  row: EntryRow
  path: readonly (string | number)[]
}

function substitute(value: unknown, env: NodeJS.ProcessEnv, where: Where): unknown {
  if (typeof value === 'string') return expand(value, env, where)
  if (Array.isArray(value)) return value.map((item, index) => substitute(item, env, { ...where, path: [...where.path, index] }))
  if (typeof value === 'object' && value !== null) {
    return Object.fromEntries(
      Object.entries(value).map(([key, item]) => [key, substitute(item, env, { ...where, path: [...where.path, key] })]),
    )
  }
  return value
}

/** Expands one string. Exported for tests and for tools that want the same rules. */
export function expand(text: string, env: NodeJS.ProcessEnv, where?: Where): string {
  return text.replace(REFERENCE, (match, body: string | undefined) => {
    if (body === undefined) return '$'
    const parsed = NAME_AND_DEFAULT.exec(body)
    if (!parsed) {
      throw new CliError('CONFIG_INVALID', { reason: `${describe(where)}: malformed reference ${match}; write \${NAME}, \${NAME:-default} or $$ for a literal $` })
    }
    const [, name = '', operator, fallback = ''] = parsed
    const value = env[name]
    if (operator === ':-') return value === undefined || value === '' ? fallback : value
    if (operator === '-') return value === undefined ? fallback : value
    if (value === undefined) {
      throw new CliError('MISSING_ENV', { where: describe(where), variable: name })
    }
    return value
  })
}

function describe(where: Where | undefined): string {
  if (!where) return 'config'
  return `${display(where.row.source)}: entry "${where.row.id}": ${where.path.map(String).join('.')}`
}
