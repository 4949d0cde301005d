/**
 * The part of the `codex app-server` protocol conch reads or sends, written by hand from
 * `codex app-server generate-ts` of the pinned version; everything else on the wire is ignored.
 * JSON Lines over stdio, JSON-RPC 2.0 without the `"jsonrpc"` field.
 */

export type RequestId = string | number

/** v2/AskForApproval.ts (the granular variant is not used). `untrusted` is refused by 0.171.0. */
export type AskForApproval = 'on-request' | 'never'

/** v2/SandboxMode.ts */
export type CodexSandboxMode = 'read-only' | 'workspace-write' | 'danger-full-access'

/** `thread/start` params (v2/ThreadStartParams.ts), the fields conch sets. */
export interface ThreadStartParams {
  cwd: string
  ephemeral: true
  approvalPolicy: AskForApproval
  sandbox: CodexSandboxMode
  model?: string
  developerInstructions?: string
}

/** `thread/start` result (v2/ThreadStartResponse.ts): `thread.id` and the effective sandbox. */
export interface ThreadStartResponse {
  thread: { id: string }
  sandbox?: { type: string }
}

/** v2/TurnStatus.ts */
export type TurnStatus = 'completed' | 'interrupted' | 'failed' | 'inProgress'

/** v2/TurnError.ts; `codexErrorInfo` (v2/CodexErrorInfo.ts) is a string (`contextWindowExceeded`, …) or an object. */
export interface TurnError {
  message: string
  codexErrorInfo: unknown
  additionalDetails: string | null
}

/** v2/Turn.ts */
export interface Turn {
  id: string
  status: TurnStatus
  error: TurnError | null
}

/** `turn/start` result (v2/TurnStartResponse.ts). */
export interface TurnStartResponse {
  turn: Turn
}

/** MessagePhase.ts: providers do not always send it; null is "unknown". */
export type MessagePhase = 'commentary' | 'partial_answer' | 'final_answer'

/** v2/ThreadItem.ts — the variants conch reads; the rest only by `type` and `id`. */
export type ThreadItem =
  | { type: 'agentMessage'; id: string; text: string; phase: MessagePhase | null }
  | { type: 'commandExecution'; id: string; command: string; status: string }
  | { type: 'fileChange'; id: string; status: string }
  | { type: 'mcpToolCall'; id: string; server?: string; tool?: string; status: string }
  | { type: 'webSearch'; id: string; query?: string }
  | { type: string; id: string; status?: string }

/** Server → client notifications conch acts on (v2/*Notification.ts). */
export interface AgentMessageDeltaNotification {
  threadId: string
  turnId: string
  itemId: string
  delta: string
}
export interface ItemNotification {
  item: ThreadItem
  threadId: string
  turnId: string
}
export interface TurnNotification {
  threadId: string
  turn: Turn
}
/** v2/ErrorNotification.ts */
export interface ErrorNotification {
  error: TurnError
  willRetry: boolean
  threadId: string
  turnId: string
}

/** Server → client approval requests (ServerRequest.ts) and their answers: declined, never granted. */
export const APPROVAL_REQUESTS = {
  /** v2/CommandExecutionRequestApprovalResponse.ts: CommandExecutionApprovalDecision. */
  'item/commandExecution/requestApproval': { decision: 'decline' },
  /** v2/FileChangeRequestApprovalResponse.ts: FileChangeApprovalDecision. */
  'item/fileChange/requestApproval': { decision: 'decline' },
  /** v2/PermissionsRequestApprovalResponse.ts: an empty grant for this turn. */
  'item/permissions/requestApproval': { permissions: {}, scope: 'turn' },
  /** v2/McpServerElicitationRequestResponse.ts */
  'mcpServer/elicitation/request': { action: 'decline', content: null, _meta: null },
  /** ExecCommandApprovalResponse.ts (v1): ReviewDecision. */
  execCommandApproval: { decision: { denied: { rejection: 'declined by the parent agent: sub-agents get no approvals' } } },
  /** ApplyPatchApprovalResponse.ts (v1): ReviewDecision. */
  applyPatchApproval: { decision: { denied: { rejection: 'declined by the parent agent: sub-agents get no approvals' } } },
} as const satisfies Record<string, unknown>

/** `item/tool/requestUserInput` (v2/ToolRequestUserInputParams.ts): answered with an error — no person is there. */
export const USER_INPUT_REQUEST = 'item/tool/requestUserInput'
