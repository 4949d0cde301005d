/**
 * The Claude Code provider in the shared provider composition (`@conch/test-support/harness`), and
 * the process-table check that nothing a test started is left.
 */
import { bootProvider, freshMark as freshMarkOf, productBinary, type ProviderHarness, type ProviderHarnessOptions } from '@conch/test-support/harness'
import { markedProcesses } from '@conch/test-support/procs'
import * as claude from '../src/index.ts'

/** Every child gets `MARK_VARIABLE=<value>` passed through, so leftovers can be found in /proc. */
export const MARK_VARIABLE = 'CLAUDE_TEST_MARK'

export type Harness = ProviderHarness

/** Boots the composition; the parent agent's session runs under `mode` in `workspaceRoot`. */
export function boot(config: Record<string, unknown>, options: Required<ProviderHarnessOptions>): Promise<Harness> {
  return bootProvider([[claude, claude.Config.parse(config)]], options)
}

/** A fresh mark, set in this process's environment so `env: [MARK_VARIABLE]` passes it on. */
export const freshMark = (): string => freshMarkOf(MARK_VARIABLE)

/** Live (non-zombie) processes whose initial environment carries `MARK_VARIABLE=value`. */
export const marked = (value: string): number[] => markedProcesses(MARK_VARIABLE, value)

/** The claude binary for the real-product tests (a failure in CI when missing; see productBinary). */
export const claudeBinary = (): string | undefined => productBinary('claude', claude.resolveClaudeExecutable(undefined), claude.NOT_FOUND_HINT)
