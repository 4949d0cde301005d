/**
 * The Codex provider in the shared provider composition (`@conch/test-support/harness`), and the
 * process-table check that nothing a test started is left.
 */
import { bootProvider, freshMark as freshMarkOf, productBinary, type ProviderHarness, type ProviderHarnessOptions } from '@conch/test-support/harness'
import { markedProcesses } from '@conch/test-support/procs'
import * as codex from '../src/index.ts'

/** Every child gets `MARK_VARIABLE=<value>` passed through, so leftovers can be found in /proc. */
export const MARK_VARIABLE = 'CODEX_TEST_MARK'

export type Harness = ProviderHarness

/** Boots the composition; the parent agent's session runs under `mode` in `workspaceRoot`. */
export function boot(config: Record<string, unknown>, options: Required<ProviderHarnessOptions>): Promise<Harness> {
  return bootProvider([[codex, codex.Config.parse(config)]], options)
}

/** A fresh mark, set in this process's environment so `env: [MARK_VARIABLE]` passes it on. */
export const freshMark = (): string => freshMarkOf(MARK_VARIABLE)

/** Live (non-zombie) processes whose initial environment carries `MARK_VARIABLE=value`. */
export const marked = (value: string): number[] => markedProcesses(MARK_VARIABLE, value)

/** The native codex binary for the real-product tests (a failure in CI when missing; see productBinary). */
export const codexBinary = (): string | undefined => productBinary('codex', codex.resolveCodexExecutable(undefined), codex.NOT_FOUND_HINT)
