/**
 * The terminals of `conch pool-worker`: a Cordis context of its own (sessions, sandbox with
 * `@conch/sandbox-local`, sandboxPolicy, pty with `@conch/pty-local`) built from the pool's
 * `workerTerminals` sections, so a pooled CLI is confined exactly as a main-process terminal.
 */
import type { TerminalSections, WorkerTerminals } from '@conch/pty-pool'
import { CliError } from './errors.ts'

interface Schema {
  safeParse(input: unknown): { success: true; data: unknown } | { success: false; error: { issues: { path: PropertyKey[]; message: string }[] } }
}

/** `section` checked by its plugin's own schema, so a bad one fails the init naming the field. */
function parseSection(section: string, schema: Schema, input: unknown): unknown {
  const parsed = schema.safeParse(input)
  if (parsed.success) return parsed.data
  const issue = parsed.error.issues[0]
  throw new CliError('CONFIG_INVALID', { reason: `pool worker: terminal.${section}.${issue?.path.map(String).join('.') ?? ''}: ${issue?.message ?? 'invalid'}` })
}

/**
 * Builds the worker's terminal composition.
 * @throws CliError `CONFIG_INVALID` naming the section and field; an Error when a service did not start.
 */
export async function composeWorkerTerminals(sections: TerminalSections): Promise<WorkerTerminals> {
  const [{ Context }, { default: SessionService }, { default: SandboxService }, sandboxLocal, { default: SandboxPolicyService }, { default: PtyService }, ptyLocal, { policyTerminals }] = await Promise.all([
    import('cordis'),
    import('@conch/session'),
    import('@conch/sandbox'),
    import('@conch/sandbox-local'),
    import('@conch/sandbox-policy'),
    import('@conch/pty'),
    import('@conch/pty-local'),
    import('@conch/pty-pool'),
  ])
  const sandboxConfig = parseSection('sandboxLocal', sandboxLocal.Config as unknown as Schema, sections.sandboxLocal)
  const ptyConfig = parseSection('ptyLocal', ptyLocal.Config as unknown as Schema, sections.ptyLocal) as { backendType: string }
  const ctx = new Context()
  const fibers: { dispose(): unknown }[] = []
  const close = async () => {
    for (const fiber of fibers.splice(0).reverse()) await fiber.dispose()
  }
  try {
    const plugins: [unknown, unknown][] = [
      [SessionService, {}],
      [SandboxService, {}],
      [sandboxLocal, sandboxConfig],
      [SandboxPolicyService, {}],
      [PtyService, {}],
      [ptyLocal, ptyConfig],
    ]
    for (const [plugin, config] of plugins) fibers.push(await ctx.plugin(plugin as never, config as never))
    for (const service of ['sessions', 'sandbox', 'sandboxPolicy', 'pty'] as const) {
      if (ctx.get(service) === undefined) throw new Error(`pool worker: ctx.${service} did not start`)
    }
  } catch (error) {
    await close()
    throw error
  }
  const host = policyTerminals({ pty: ctx.pty, sessions: ctx.sessions, sandboxPolicy: ctx.sandboxPolicy, sandbox: ctx.sandbox, type: ptyConfig.backendType })
  return {
    terminals: host.terminals,
    close: async () => {
      await host.close()
      await close()
    },
  }
}
