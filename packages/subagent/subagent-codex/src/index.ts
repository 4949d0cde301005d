/**
 * `@conch/subagent-codex`: OpenAI Codex as a `ctx.subagents` provider, driven through
 * `codex app-server` over stdio.
 */
import type { Context } from 'cordis'
import { z } from 'zod'
import { cacheFolder, executableFile, hidePrivateRoot, modeFence, outOfProcessConfig, parentWritable, providerName, type SubagentServiceApi } from '@conch/subagent'
import type { CodexSandboxMode } from './protocol.ts'
import { codexProvider, type CodexProviderConfig } from './provider.ts'

export { codexProvider, projectSandbox, type CodexProviderConfig, type CodexProviderDeps, type SandboxSetting } from './provider.ts'
export { resolveCodexExecutable, findProductsDir, NOT_FOUND_HINT } from './resolve.ts'
export { BASE_CONFIG, createCodexHome, mergeTables, toToml, type TomlTable, type TomlValue } from './codex-home.ts'
export { JsonLinesConnection } from './connection.ts'
export { CodexSession, type SessionState } from './session.ts'
export * from './protocol.ts'

export const name = 'subagent-codex'
export const inject = ['subagents', 'subprocess']

const MODES = ['read-only', 'workspace-write', 'danger-full-access'] as const

/** TOML-able settings: strings, finite numbers, booleans, arrays and nested tables. */
const TomlValue: z.ZodType<unknown> = z.lazy(() =>
  z.union([z.string(), z.number().finite(), z.boolean(), z.array(TomlValue), z.record(z.string(), TomlValue)]),
)

export const Config = z.strictObject({
  name: providerName('codex'),
  executable: executableFile('the native codex binary').describe('The native codex binary. Unset: the products folder (.products/, or CONCH_PRODUCTS_DIR), then `codex` on PATH (an npm wrapper is followed to its binary).'),
  model: z.string().min(1).optional().describe('Model slug for thread/start; unset: the model in `config`, else Codex\'s default.'),
  approvalPolicy: z
    .enum(['on-request', 'never'])
    .default('on-request')
    .describe('Codex approval policy. on-request: the model may ask to leave the sandbox, and conch declines; never: it cannot ask.'),
  sandbox: z
    .enum(['inherit', ...MODES])
    .default('inherit')
    .describe("Codex's sandbox: inherit projects the parent's mode; a mode narrows it further (never wider than the parent)."),
  config: z
    .record(z.string(), TomlValue)
    .default({})
    .describe('Settings written to the private config.toml over conch\'s offline defaults (model, model_provider, [model_providers.*], …).'),
  homeRoot: cacheFolder('codex').describe("Where each run's private CODEX_HOME is created (and removed after the run); must not be under the child's TMPDIR."),
  ...outOfProcessConfig,
})
  // A row without `config` gets every default.
  .prefault({})

export type Config = z.output<typeof Config>

export const apply = (ctx: Context, config: Config) => {
  const subagents: SubagentServiceApi = ctx.subagents
  const fence = modeFence<CodexSandboxMode>(ctx, config.name)
  hidePrivateRoot(ctx, config.homeRoot, `${config.name} sub-agents`)
  subagents.registerProvider(codexProvider({ subprocess: ctx.subprocess, parentMode: fence.parentMode, track: fence.track, parentWritable: (request) => parentWritable(ctx, request.parent) }, config as CodexProviderConfig))
}
