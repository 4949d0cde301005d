/**
 * Test compositions: a `cordis.yml` written from typed rows (docs/configuration.md: a YAML list
 * of `{id, name, config, disabled, group}`), so a test names plugins and their config as data
 * and never concatenates YAML. A test whose subject is the YAML itself (a typo, an overlay, a
 * `${VARIABLE}`) writes that text by hand.
 */
import { writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { stringify } from 'yaml'

export interface CompositionRow {
  id: string
  /** A package name (`@conch/pty`) or a path from the yml's folder (`./echo-tool.ts`); none for a group. */
  name?: string
  /** The plugin's config; a group's rows. */
  config?: Record<string, unknown> | CompositionRow[]
  disabled?: boolean
  group?: boolean
}

export type SandboxMode = 'read-only' | 'workspace-write' | 'danger-full-access'

/** The rows as `cordis.yml` text. */
export function compositionYaml(rows: readonly CompositionRow[]): string {
  return stringify(rows)
}

/** Writes `rows` to `dir/file` (default `cordis.yml`) and returns the file's path. */
export function writeComposition(dir: string, rows: readonly CompositionRow[], file = 'cordis.yml'): string {
  const path = join(dir, file)
  writeFileSync(path, compositionYaml(rows))
  return path
}

const withConfig = (id: string, name: string, config: Record<string, unknown> | undefined): CompositionRow => (config === undefined ? { id, name } : { id, name, config })

/** The spine — sessions (with `sessions` config), tools, llm — then `rows`, then the agents last. */
export function spine(rows: readonly CompositionRow[] = [], sessions?: Record<string, unknown>): CompositionRow[] {
  return [withConfig('sessions', '@conch/session', sessions), { id: 'tools', name: '@conch/tools' }, { id: 'llm', name: '@conch/llm' }, ...rows, { id: 'agents', name: '@conch/agent' }]
}

export interface TerminalCompositionOptions {
  /** The scripted model's JSON Lines file (`@conch/llm-replay`). */
  script: string
  mode: SandboxMode
  /** `@conch/tasks` and `@conch/tool-tasks`. */
  tasks?: boolean
  /** run_code: `@conch/ptc`, `@conch/ptc-node`, `@conch/tool-ptc`. */
  runCode?: boolean
  /** Rows after the terminal rows (before the agents). */
  more?: readonly CompositionRow[]
  /** Those rows' config. */
  sessions?: Record<string, unknown>
  sandboxLocal?: Record<string, unknown>
  /** The sandbox-policy row's config besides `mode`. */
  sandboxPolicy?: Record<string, unknown>
  ptyLocal?: Record<string, unknown>
  toolPty?: Record<string, unknown>
}

/**
 * The terminal composition of a real `conch run`: the spine, the scripted model, process
 * ownership, the sandbox services under `mode`, `@conch/pty`, `@conch/pty-local` and
 * `@conch/tool-pty`, with the task and run_code rows when asked for.
 */
export function terminalComposition(options: TerminalCompositionOptions): CompositionRow[] {
  return spine(
    [
      { id: 'model', name: '@conch/llm-replay', config: { script: options.script } },
      ...(options.tasks === true ? [{ id: 'tasks', name: '@conch/tasks' }, { id: 'tool-tasks', name: '@conch/tool-tasks' }] : []),
      { id: 'subprocess', name: '@conch/subprocess' },
      { id: 'sandbox', name: '@conch/sandbox' },
      withConfig('sandbox-local', '@conch/sandbox-local', options.sandboxLocal),
      { id: 'sandbox-policy', name: '@conch/sandbox-policy', config: { mode: options.mode, ...options.sandboxPolicy } },
      { id: 'pty', name: '@conch/pty' },
      withConfig('pty-local', '@conch/pty-local', options.ptyLocal),
      withConfig('tool-pty', '@conch/tool-pty', options.toolPty),
      ...(options.runCode === true ? [{ id: 'ptc', name: '@conch/ptc' }, { id: 'ptc-node', name: '@conch/ptc-node' }, { id: 'tool-ptc', name: '@conch/tool-ptc' }] : []),
      ...(options.more ?? []),
    ],
    options.sessions,
  )
}

/**
 * The `subagent` tool on a child conch: `@conch/subagent`, `@conch/subagent-conch` with the
 * child's model `script` (and its composition `config`, when given), and `@conch/tool-subagent`.
 */
export function conchSubagent(options: { script: string; config?: string }): CompositionRow[] {
  return [
    { id: 'subagents', name: '@conch/subagent' },
    { id: 'subagent-conch', name: '@conch/subagent-conch', config: { ...(options.config === undefined ? {} : { config: options.config }), script: options.script } },
    { id: 'tool-subagent', name: '@conch/tool-subagent', config: { provider: 'conch' } },
  ]
}
