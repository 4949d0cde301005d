/**
 * Errors `conch acp` answers requests with. Each is a JSON-RPC error (the SDK's `RequestError`,
 * so the connection sends its `code`, `message` and `data` as they are) with a stable
 * SCREAMING_SNAKE `errorCode`, repeated in `data.errorCode` for clients.
 *
 * JSON-RPC codes follow JSON-RPC 2.0 §5.1 and ACP's additions: -32602 invalid params, -32600 a
 * request that is not valid in the current state, -32002 resource (session) not found, -32603
 * internal error (a model failure).
 */
import { RequestError } from '@agentclientprotocol/sdk'

export type AcpErrorCode =
  /** `session/new` with a `cwd` that is not an absolute path (ACP: "Must be an absolute path"). */
  | 'CWD_NOT_ABSOLUTE'
  /** `session/new` with a `cwd` that does not exist or is not a directory. */
  | 'CWD_NOT_DIRECTORY'
  /** `session/new` with a `cwd` the embedding refuses as a workspace (`RunAcpOptions.workspaceProblem`: under `conch acp`, `/`, a system folder, conch's own folders, a shared temporary folder under a confining sandbox mode). */
  | 'CWD_REFUSED'
  /** A request option conch does not support and did not advertise (MCP servers, additional directories). */
  | 'UNSUPPORTED_OPTION'
  /** A prompt content block conch did not advertise (image, audio, a binary resource). */
  | 'UNSUPPORTED_CONTENT'
  /** A prompt with no text at all. */
  | 'EMPTY_PROMPT'
  /** A session id this connection does not have (never created, or closed). */
  | 'UNKNOWN_SESSION'
  /** `session/prompt` while the session still runs a turn. */
  | 'PROMPT_ACTIVE'
  /** The session is being closed (or the connection is shutting down). */
  | 'SESSION_CLOSING'
  /** `session/new` while the connection has `maxSessions` sessions (open, opening or closing). */
  | 'TOO_MANY_SESSIONS'
  /** The model failed during the turn (network, API error, an exhausted script). */
  | 'MODEL_ERROR'

/** JSON-RPC 2.0 error codes used here. */
export const RPC = {
  INVALID_REQUEST: -32600,
  INVALID_PARAMS: -32602,
  INTERNAL_ERROR: -32603,
  RESOURCE_NOT_FOUND: -32002,
} as const

const RPC_CODES: Record<AcpErrorCode, number> = {
  CWD_NOT_ABSOLUTE: RPC.INVALID_PARAMS,
  CWD_NOT_DIRECTORY: RPC.INVALID_PARAMS,
  CWD_REFUSED: RPC.INVALID_PARAMS,
  UNSUPPORTED_OPTION: RPC.INVALID_PARAMS,
  UNSUPPORTED_CONTENT: RPC.INVALID_PARAMS,
  EMPTY_PROMPT: RPC.INVALID_PARAMS,
  UNKNOWN_SESSION: RPC.RESOURCE_NOT_FOUND,
  PROMPT_ACTIVE: RPC.INVALID_REQUEST,
  SESSION_CLOSING: RPC.INVALID_REQUEST,
  TOO_MANY_SESSIONS: RPC.INVALID_REQUEST,
  MODEL_ERROR: RPC.INTERNAL_ERROR,
}

/**
 * A JSON-RPC error with a stable `errorCode`. `data` is `{errorCode, ...details}`; the message
 * names the thing and, where there is one, the fix.
 */
export class AcpError extends RequestError {
  override readonly name = 'AcpError'
  constructor(
    readonly errorCode: AcpErrorCode,
    message: string,
    details: Record<string, unknown> = {},
  ) {
    super(RPC_CODES[errorCode], message, { errorCode, ...details })
  }
}
