/**
 * `@conch/subagent-claude-code`: Claude Code as a `ctx.subagents` provider, through the
 * official Claude Agent SDK's `query()`.
 */
import type { Context } from 'cordis'
import { z } from 'zod'
import { cacheFolder, executableFile, hidePrivateRoot, modeFence, outOfProcessConfig, parentWritable, providerName, type SubagentServiceApi } from '@conch/subagent'
import { claudeCodeProvider, type ClaudeCodeProviderConfig, type SandboxMode } from './provider.ts'

export { claudeCodeProvider, projectSandbox, WRITE_TOOLS, type ClaudeCodeProviderConfig, type ClaudeCodeProviderDeps, type SandboxMode } from './provider.ts'
export { resolveClaudeExecutable, findProductsDir, platformPackage, NOT_FOUND_HINT } from './resolve.ts'
/** The SDK's own `query()`, for benchmarks that drive the raw product beside the provider. */
export { query as sdkQuery } from '@anthropic-ai/claude-agent-sdk'

export const name = 'subagent-claude-code'
export const inject = ['subagents', 'subprocess']

const ToolName = z.string().min(1)

export const Config = z.strictObject({
  name: providerName('claude-code'),
  executable: executableFile('the claude binary').describe("The claude binary. Unset: the products folder (.products/, or CONCH_PRODUCTS_DIR), the SDK's platform package, then `claude` on PATH."),
  model: z.string().min(1).optional().describe("Model for the child; unset: Claude Code's default."),
  allowedTools: z
    .array(ToolName)
    .default([])
    .describe("Tools the child may use without asking (permission rules such as Bash(git status:*)); every other tool needing permission is denied ('dontAsk')."),
  disallowedTools: z.array(ToolName).default([]).describe('Tools removed from the child (AskUserQuestion always is).'),
  settingSources: z
    .array(z.enum(['user', 'project', 'local']))
    .default([])
    .describe('Claude Code settings files the child loads; none by default.'),
  maxTurns: z.number().int().positive().optional().describe('Most model turns the child may take; unset: no limit.'),
  configDir: z
    .enum(['private', 'inherit'])
    .default('private')
    .describe("private: a fresh CLAUDE_CONFIG_DIR per run (removed after it); inherit: the server's own (needed for a login kept there)."),
  stateRoot: cacheFolder('claude-code').describe('Where private config dirs are created.'),
  ...outOfProcessConfig,
})
  // A row without `config` gets every default.
  .prefault({})

export type Config = z.output<typeof Config>

export const apply = (ctx: Context, config: Config) => {
  const subagents: SubagentServiceApi = ctx.subagents
  const fence = modeFence<SandboxMode>(ctx, config.name)
  hidePrivateRoot(ctx, config.stateRoot, `${config.name} sub-agents`)
  subagents.registerProvider(claudeCodeProvider({ subprocess: ctx.subprocess, parentMode: fence.parentMode, track: fence.track, parentWritable: (request) => parentWritable(ctx, request.parent) }, config as ClaudeCodeProviderConfig))
}
