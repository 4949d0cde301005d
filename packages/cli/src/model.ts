/**
 * Choosing the model from the command line: `--script FILE` switches any composition to the
 * scripted model, and without a script the live model must have an API key.
 */
import { Config as OpenAIConfig, missingKeyMessage, resolveEndpoint } from '@conch/llm-openai/endpoint'
import { applyPatches, flattenRows, type EntryRow, type Patch } from './compose.ts'
import { CliError } from './errors.ts'

export const LLM_PACKAGE = '@conch/llm'
export const REPLAY_PACKAGE = '@conch/llm-replay'
export const OPENAI_PACKAGE = '@conch/llm-openai'
/** The provider name `@conch/llm-replay` registers on `ctx.llm`. */
export const REPLAY_PROVIDER = 'replay'
/** How deep a conch is in a chain of sub-agents, set by `@conch/subagent-conch` on the child it starts (unset: 0). */
export const SUBAGENT_DEPTH_VARIABLE = 'CONCH_SUBAGENT_DEPTH'

/**
 * Patches `entries` so the scripted model answers: the `@conch/llm-replay` row gets
 * `config.script` (it is inserted after the `@conch/llm` row when there is none, and enabled
 * when disabled), `@conch/llm`'s `provider` becomes the replay row's provider (`replay`
 * unless configured), and `@conch/llm-openai` rows are disabled so no live request can happen
 * and no key is needed.
 * @param script absolute path of the JSON Lines script.
 */
export function useScript(entries: readonly EntryRow[], script: string, source: string): EntryRow[] {
  const rows = flattenRows(entries)
  const patches: Patch[] = []
  const replay = rows.find((row) => row.name === REPLAY_PACKAGE)
  const llm = rows.find((row) => row.name === LLM_PACKAGE)
  let provider = REPLAY_PROVIDER
  if (replay) {
    const config = asObject(replay.config)
    if (typeof config['provider'] === 'string') provider = config['provider']
    patches.push({ patch: replay.id, config: { ...config, script }, disabled: false })
  } else {
    const ids = new Set(rows.map((row) => row.id))
    let id = 'llm-replay'
    for (let n = 2; ids.has(id); n++) id = `llm-replay-${n}`
    patches.push({ insert: { id, name: REPLAY_PACKAGE, config: { script } }, ...(llm ? { after: llm.id } : {}) })
  }
  if (llm) patches.push({ patch: llm.id, config: { ...asObject(llm.config), provider } })
  for (const row of rows) {
    if (row.name === OPENAI_PACKAGE && !row.disabled) patches.push({ patch: row.id, disabled: true })
  }
  return applyPatches(entries, patches, source)
}

/**
 * Without a script, an enabled `@conch/llm-openai` row needs a key or a named endpoint in the
 * environment (`resolveEndpoint`) —
 * unless `@conch/llm`'s `provider` names an enabled `@conch/llm-replay` row's provider (a
 * snapshot overlay that selects the scripted model in the yml).
 * @throws CliError `NO_API_KEY` (exit 2) explaining how to set a key or use `--script` — or, in a
 *   conch started as a sub-agent (`CONCH_SUBAGENT_DEPTH` ≥ 1), the parent entry's `script` and `env`.
 */
export function checkApiKey(entries: readonly EntryRow[], env: NodeJS.ProcessEnv): void {
  const rows = flattenRows(entries).filter((row) => !row.disabled)
  const llm = rows.find((row) => row.name === LLM_PACKAGE)
  const scripted: unknown[] = rows
    .filter((row) => row.name === REPLAY_PACKAGE)
    .map((row) => asObject(row.config)['provider'] ?? REPLAY_PROVIDER)
  const provider = asObject(llm?.config)['provider']
  if (provider !== undefined && scripted.includes(provider)) return
  for (const row of rows.filter((row) => row.name === OPENAI_PACKAGE)) {
    // The adapter's own rule; a config it refuses is reported by the boot, naming the field.
    const config = OpenAIConfig.safeParse(row.config)
    if (!config.success || resolveEndpoint(config.data, env)) continue
    const primary = config.data.endpoints[0]!.apiKeyEnv
    // A conch another conch started (`@conch/subagent-conch` sets the depth) gets its script or
    // key from that parent's entry, not from a command line of its own.
    const depth = Number(env[SUBAGENT_DEPTH_VARIABLE] ?? '0')
    const fix =
      Number.isInteger(depth) && depth > 0
        ? [
            `This conch is a sub-agent (${SUBAGENT_DEPTH_VARIABLE}=${depth}): give it a scripted model with the \`script\` setting of the parent's`,
            '@conch/subagent-conch entry (the root cordis.yml reads CONCH_SUBAGENT_SCRIPT there), or pass it a key through that entry\'s `env`',
            `(e.g. env: [${primary}]).`,
          ]
        : [
            `Set one, for example:  export ${primary}=sk-...`,
            'or run a scripted session instead:  conch run --script FILE "task"',
            '(a script is JSON Lines, one model reply per line, e.g. examples/headless-agent/demo.jsonl).',
          ]
    throw new CliError('NO_API_KEY', { reason: [`entry "${row.id}": ${missingKeyMessage(config.data)}.`, ...fix].join('\n') })
  }
}

function asObject(value: unknown): Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value) ? (value as Record<string, unknown>) : {}
}
