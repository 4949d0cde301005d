/**
 * `ctx.ptc`: the seam between callers of programmatic tool calling (`run_code`, services) and
 * the runtime (`@conch/ptc-node`), owning the rules every runtime shares: resolving a request
 * against its owner, legal binding names, refusal after disposal.
 */
import { isAbsolute } from 'node:path'
import { Service, type Context } from 'cordis'
import { z } from 'zod'
import { SANDBOX_MODES } from '@conch/sandbox'
import type { SandboxPolicyServiceApi } from '@conch/sandbox-policy'
import { checkBindings } from './bindings.ts'
import {
  PtcError,
  type PtcOwner,
  type PtcPolicy,
  type PtcRequest,
  type PtcResult,
  type PtcRunOptions,
  type PtcRuntime,
  type PtcServiceApi,
  type PtcSpec,
  type PtcTimeouts,
} from './types.ts'

declare module 'cordis' {
  interface Context {
    ptc: PtcService
  }
}

/** The shape `run` accepts: everything resolved, nothing left to default. */
const Spec = z.object({
  owner: z.custom<PtcOwner>((value) => typeof value === 'object' && value !== null, 'owner must be the Agent the program runs for'),
  code: z.string(),
  cwd: z.string().refine(isAbsolute, 'cwd must be an absolute path'),
  timeoutMs: z.number().int().positive().nullable(),
  policy: z.object({
    mode: z.enum(SANDBOX_MODES),
    workspaceRoot: z.string().refine(isAbsolute, 'policy.workspaceRoot must be an absolute path'),
    network: z.custom<NonNullable<PtcPolicy['network']>>((value) => typeof value === 'object' && value !== null && 'mode' in value, 'policy.network must be {mode}').optional(),
  }),
})

class PtcService extends Service implements PtcServiceApi {
  static inject = ['sandboxPolicy']

  static Config = z
    .strictObject({
      /** Bound on a program's text, in UTF-8 bytes: a longer one is refused by `resolve`. */
      maxCodeBytes: z.number().int().positive().default(1_048_576),
    })
    .prefault({})

  private runtime: PtcRuntime | undefined
  private readonly state = { disposed: false }
  private readonly sandboxPolicy: SandboxPolicyServiceApi

  constructor(ctx: Context, public config: PtcService.Config) {
    super(ctx, 'ptc')
    this.sandboxPolicy = ctx.sandboxPolicy
    ctx.effect(() => () => {
      this.state.disposed = true
    }, 'ptc.dispose')
  }

  register(runtime: PtcRuntime): () => void {
    if (this.runtime !== undefined) {
      throw new PtcError('DUPLICATE_RUNTIME', { registered: this.runtime.name, runtime: runtime.name })
    }
    return this.ctx.effect(() => {
      this.runtime = runtime
      return () => {
        if (this.runtime === runtime) this.runtime = undefined
      }
    }, `ptc.register(${runtime.name})`)
  }

  timeouts(): PtcTimeouts | undefined {
    return this.runtime?.timeouts
  }

  resolve(request: PtcRequest, owner: PtcOwner): PtcSpec {
    const runtime = this.live()
    if (typeof request !== 'object' || request === null) throw new PtcError('INVALID_OPTIONS', { field: 'the request', problem: 'must be an object {code, cwd?, timeoutMs?}' })
    if (typeof request.code !== 'string' || request.code.trim() === '') {
      throw new PtcError('INVALID_OPTIONS', { field: 'code', problem: 'is empty: pass the program text as the body of an async function' })
    }
    const bytes = Buffer.byteLength(request.code, 'utf8')
    if (bytes > this.config.maxCodeBytes) {
      throw new PtcError('INVALID_OPTIONS', {
        field: 'code',
        problem: `is ${bytes} bytes, over the ${this.config.maxCodeBytes}-byte bound on a program (ptc config maxCodeBytes): write the data to a file in the workspace and read it from a shorter program`,
      })
    }
    const policy = this.sandboxPolicy.resolve({ session: owner.session })
    const cwd = request.cwd ?? policy.workspaceRoot
    if (typeof cwd !== 'string' || !isAbsolute(cwd)) throw new PtcError('INVALID_OPTIONS', { field: 'cwd', problem: `must be an absolute path, got ${JSON.stringify(cwd)}` })
    return {
      owner,
      code: request.code,
      cwd,
      timeoutMs: deadline(request.timeoutMs, runtime.timeouts),
      policy: { mode: policy.mode, workspaceRoot: policy.workspaceRoot, network: policy.network },
    }
  }

  async run(spec: PtcSpec, options: PtcRunOptions = {}): Promise<PtcResult> {
    const runtime = this.live()
    const parsed = Spec.safeParse(spec)
    if (!parsed.success) {
      const issue = parsed.error.issues[0]
      throw new PtcError('INVALID_OPTIONS', { field: 'the spec', problem: `is not resolved (use ctx.ptc.resolve): ${issue?.path.join('.') || 'spec'}: ${issue?.message ?? 'invalid'}` })
    }
    const bindings = checkBindings(options.bindings ?? [])
    return runtime.run(spec, { bindings, ...(options.signal && { signal: options.signal }) })
  }

  private live(): PtcRuntime {
    if (this.state.disposed) throw new PtcError('DISPOSED', { what: 'the ptc service' })
    if (this.runtime === undefined) throw new PtcError('NO_RUNTIME', {})
    return this.runtime
  }
}

/**
 * The deadline of a request (see `PtcRequest.timeoutMs`).
 * @throws PtcError `INVALID_OPTIONS` for anything else (0, negative, fractional, NaN, a string).
 */
function deadline(requested: number | null | undefined, timeouts: PtcTimeouts): number | null {
  if (requested === undefined) return timeouts.timeoutMs
  if (requested === null) return null
  if (typeof requested !== 'number' || !Number.isInteger(requested) || requested <= 0) {
    throw new PtcError('INVALID_OPTIONS', { field: 'timeoutMs', problem: `must be a positive integer number of ms (or omitted), got ${JSON.stringify(requested)}` })
  }
  return Math.min(requested, timeouts.maxTimeoutMs)
}

namespace PtcService {
  export type Config = z.output<typeof PtcService.Config>
}

export default PtcService
