/**
 * Options of `conch acp` (`runAcp({config})`). Every size is in UTF-8 bytes, every duration in
 * ms; defaults live here and nowhere else.
 */
import { z } from 'zod'
import packageJson from '../package.json' with { type: 'json' }

export const Config = z
  .strictObject({
    agentName: z.string().min(1).default('conch').describe('`agentInfo.name` in the initialize response.'),
    agentTitle: z.string().min(1).default('conch').describe('`agentInfo.title`: what a client shows for this agent.'),
    agentVersion: z.string().min(1).default(packageJson.version).describe('`agentInfo.version` (default: the @conch/acp package version).'),
    streamBytes: z
      .number()
      .int()
      .min(256)
      .default(65536)
      .describe('Bound of the live output a running terminal_send shows in its tool_call_update content, in UTF-8 bytes (newest kept).'),
    streamIntervalMs: z
      .number()
      .int()
      .min(0)
      .default(100)
      .describe('Least time between two live-output updates of one tool call, in ms; output arriving sooner is merged into the next update. 0 sends one update per chunk.'),
    maxFrameBytes: z
      .number()
      .int()
      .min(1024)
      .max(1024 * 1024 * 1024)
      .default(32 * 1024 * 1024)
      .describe('Longest incoming JSON-RPC frame (one line), in bytes. A longer one is answered with a parse error (id null), logged, and discarded; the server keeps serving.'),
    maxSessions: z
      .number()
      .int()
      .positive()
      .default(64)
      .describe('Most sessions one connection has at once (open, opening, or closing); one more session/new is answered TOO_MANY_SESSIONS.'),
    shutdownGraceMs: z
      .number()
      .int()
      .positive()
      .default(5000)
      .describe('On SIGTERM, how long running prompts get to end (their terminal sends are interrupted) and be answered `cancelled` before the connection closes, in ms.'),
  })
  .prefault({})

export type Config = z.output<typeof Config>
export type ConfigInput = z.input<typeof Config>
