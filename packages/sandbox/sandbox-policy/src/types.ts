/** The contract of `ctx.sandboxPolicy`: per-session sandbox modes, event-sourced (service.ts). */
import type { AgentNetwork, SandboxMode } from '@conch/sandbox'
import { errorClass, type ErrorMessages, type ErrorOf, type SessionLog } from '@conch/session'

/** Data of a `sandbox/mode` session event. */
export interface SandboxModeEventData {
  mode: SandboxMode
}

export interface ResolvedPolicy {
  mode: SandboxMode
  /** Absolute canonical path: the session's `workspaceRoot` from `session/start`, else the configured one. */
  workspaceRoot: string
  sessionId: string
  /** The agent's network (config `network` and `allow`); `full` under danger-full-access. */
  network: AgentNetwork
  /** Ports of the agent's loopback reachable from host loopback ports (config `expose`). */
  expose: number[]
}

/**
 * A party that must approve mode changes, such as the terminal backend (a shell started under
 * one mode keeps it for life). `busy` returns a reason — e.g. `terminals pty-1, pty-2 are
 * open or opening` — when the session's effective mode must not change now, else undefined.
 */
export interface ModeFence {
  name: string
  busy(sessionId: string): string | undefined
}

/** The codes of `SandboxPolicyError`, each with its details and its message. */
const SANDBOX_POLICY_ERRORS = {
  /** `busy`: what each fence reported (`agent-1 has terminals open: pty-1`). */
  MODE_CHANGE_REFUSED: (d: { from: SandboxMode; to: SandboxMode; busy: string[] }) =>
    `cannot change the sandbox mode from ${d.from} to ${d.to} while ${d.busy.join(' and ')}; close them first (terminal_close) and try again`,
  INVALID_MODE: (d: { mode: unknown; sessionId: string; modes: readonly string[] }) =>
    `unknown sandbox mode ${JSON.stringify(d.mode)} for session ${d.sessionId}: expected one of ${d.modes.join(', ')}`,
} satisfies ErrorMessages

export type SandboxPolicyErrorCode = keyof typeof SANDBOX_POLICY_ERRORS
export const SandboxPolicyError = errorClass('SandboxPolicyError', SANDBOX_POLICY_ERRORS)
export type SandboxPolicyError<C extends SandboxPolicyErrorCode = SandboxPolicyErrorCode> = ErrorOf<typeof SANDBOX_POLICY_ERRORS, C>

/** The public surface of `ctx.sandboxPolicy` (implemented by the default-exported `SandboxPolicyService`). */
export interface SandboxPolicyServiceApi {
  resolve(options: { session: SessionLog }): ResolvedPolicy
  /**
   * Appends a `sandbox/mode` event. A change of the effective mode while any fence is busy is
   * vetoed before the append (as is such an event appended directly).
   * @throws SandboxPolicyError `INVALID_MODE` for an unknown mode; `MODE_CHANGE_REFUSED` naming the busy fences.
   */
  setMode(session: SessionLog, mode: SandboxMode): void
  /** Registers a fence; the disposer is tied to the caller's plugin scope. */
  fence(fence: ModeFence): () => void
}
