/**
 * A provider plugin in the shared provider composition (`@conch/test-support/harness`: the spine,
 * ctx.subprocess, ctx.subagents), and the process-table check that nothing a test started is left.
 */
import { bootProvider, freshMark as freshMarkOf, type ProviderHarness } from '@conch/test-support/harness'
import { markedProcesses } from '@conch/test-support/procs'

/** Every child of these tests gets `MARK_VARIABLE=<value>` passed through, so leftovers can be found. */
export const MARK_VARIABLE = 'SUBAGENT_TEST_MARK'

export type Harness = ProviderHarness

/** Boots the composition with `plugin` (a provider's module namespace) mounted with `config`. */
export function boot(plugin: object, config: Record<string, unknown>, workspaceRoot: string): Promise<Harness> {
  return bootProvider([[plugin, config]], { workspaceRoot })
}

/** A fresh mark, set in this process's environment so `env: [MARK_VARIABLE]` passes it on. */
export const freshMark = (): string => freshMarkOf(MARK_VARIABLE)

/** Live (non-zombie) processes whose initial environment carries `MARK_VARIABLE=value`. */
export const marked = (value: string): number[] => markedProcesses(MARK_VARIABLE, value)
