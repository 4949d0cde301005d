/**
 * Each run's private `CODEX_HOME` (its `config.toml`, state databases and logs), removed at
 * disposal. It must not lie under the child's `TMPDIR`: Codex refuses to install its sandbox
 * helper there, and every sandboxed command then fails.
 */
import { mkdtempSync, realpathSync, rmSync, writeFileSync, mkdirSync } from 'node:fs'
import { join, relative, isAbsolute } from 'node:path'

/**
 * Settings every run starts from: no update check, no analytics or feedback upload, and the
 * features that reach remote hosts on their own turned off. The configured `config` is merged
 * over them (and may turn a feature back on).
 */
export const BASE_CONFIG: TomlTable = {
  check_for_update_on_startup: false,
  analytics: { enabled: false },
  feedback: { enabled: false },
  features: {
    plugins: false,
    apps: false,
    remote_plugin: false,
    plugin_sharing: false,
    tool_suggest: false,
    skill_mcp_dependency_install: false,
    shell_snapshot: false,
    image_generation: false,
    computer_use: false,
    browser_use: false,
    in_app_browser: false,
    goals: false,
  },
}

export type TomlValue = string | number | boolean | TomlValue[] | TomlTable
export interface TomlTable {
  [key: string]: TomlValue
}

const isTable = (value: unknown): value is TomlTable => typeof value === 'object' && value !== null && !Array.isArray(value)

/** `over` merged into `base`: tables merge key by key, anything else replaces. */
export function mergeTables(base: TomlTable, over: TomlTable): TomlTable {
  const merged: TomlTable = { ...base }
  for (const [key, value] of Object.entries(over)) {
    const current = merged[key]
    merged[key] = isTable(current) && isTable(value) ? mergeTables(current, value) : value
  }
  return merged
}

const BARE_KEY = /^[A-Za-z0-9_-]+$/
/** A TOML key: bare when it can be (TOML 1.0 § Keys), else a basic string. */
const key = (name: string): string => (BARE_KEY.test(name) ? name : JSON.stringify(name))

/** A TOML value. JSON string escapes are valid TOML basic-string escapes. */
function value(input: TomlValue, path: string): string {
  if (typeof input === 'string') return JSON.stringify(input)
  if (typeof input === 'boolean') return String(input)
  if (typeof input === 'number') {
    if (!Number.isFinite(input)) throw new TypeError(`${path}: TOML has no ${input}`)
    return String(input)
  }
  if (Array.isArray(input)) return `[${input.map((item, index) => value(item, `${path}[${index}]`)).join(', ')}]`
  // An inline table inside an array.
  return `{ ${Object.entries(input)
    .map(([name, item]) => `${key(name)} = ${value(item, `${path}.${name}`)}`)
    .join(', ')} }`
}

/** Serialises a table as TOML: plain keys first, then each sub-table under its `[dotted.header]`. */
export function toToml(table: TomlTable, prefix: string[] = []): string {
  const lines: string[] = []
  const tables: [string, TomlTable][] = []
  for (const [name, item] of Object.entries(table)) {
    if (isTable(item)) tables.push([name, item])
    else lines.push(`${key(name)} = ${value(item, [...prefix, name].join('.'))}`)
  }
  let text = lines.join('\n')
  for (const [name, sub] of tables) {
    const path = [...prefix, name]
    const body = toToml(sub, path)
    const hasKeys = Object.values(sub).some((item) => !isTable(item))
    // A table holding only tables needs no header of its own (TOML 1.0 § Table: super-tables are implicit).
    const section = hasKeys || body === '' ? `[${path.map(key).join('.')}]${body === '' ? '' : `\n${body}`}` : body
    text += `${text === '' ? '' : '\n\n'}${section}`
  }
  return text
}

/** True when `path` is `dir` or lies inside it (both made canonical when they exist). */
export function isInside(path: string, dir: string): boolean {
  const canonical = (p: string) => {
    try {
      return realpathSync(p)
    } catch {
      return p
    }
  }
  const rel = relative(canonical(dir), canonical(path))
  return rel === '' || (!rel.startsWith('..') && !isAbsolute(rel))
}

export interface CodexHome {
  readonly path: string
  /** Removes the directory and everything Codex wrote into it. Idempotent. */
  remove(): void
}

/**
 * Creates `<root>/run-XXXXXX` (mode 0700) with `config.toml`.
 * @throws Error naming the root when it lies under `childTmpDir`, or cannot be created.
 */
export function createCodexHome(options: { root: string; childTmpDir: string; config: TomlTable }): CodexHome {
  if (isInside(options.root, options.childTmpDir)) {
    throw new Error(
      `the codex home root ${options.root} lies under the child's temporary directory ${options.childTmpDir}, where Codex refuses to install its sandbox helper; set homeRoot elsewhere`,
    )
  }
  mkdirSync(options.root, { recursive: true, mode: 0o700 })
  const path = mkdtempSync(join(options.root, 'run-'))
  writeFileSync(join(path, 'config.toml'), `${toToml(mergeTables(BASE_CONFIG, options.config))}\n`, { mode: 0o600 })
  let removed = false
  return {
    path,
    remove() {
      if (removed) return
      removed = true
      rmSync(path, { recursive: true, force: true })
    },
  }
}
