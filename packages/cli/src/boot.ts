/**
 * Booting a composition: a root Context with a readable stderr logger and an `internal/error`
 * listener (so nothing fails silently), `@cordisjs/plugin-loader` fed with the resolved rows,
 * then the audit — every enabled entry must be active — and, on the way out, a shutdown that
 * disposes entries in reverse file order (dependents first: terminals close before the pty
 * service goes) and awaits each one.
 */
import { dirname } from 'node:path'
import { pathToFileURL } from 'node:url'
import { Context, Logger, type Exporter, type Fiber, type Message } from 'cordis'
import Loader, { Group } from '@cordisjs/plugin-loader'
import type { SandboxServiceApi } from '@conch/sandbox'
import { entryOf, FIBER_ACTIVE, fiberError as errorOfFiber, serviceProvider } from '@conch/session/cordis-internals'
import { type Composition, type EntryRow } from './compose.ts'
import { BootError, CliError, type EntryFailure } from './errors.ts'
import { recordResolutions, type ClosureRecording, type Resolution } from './closure.ts'
import { localCodePaths, localPluginPaths, protectedPathsOf, realpathOf } from './protect.ts'
import { enabledRows, importByUrl, preparePlugins } from './resolve.ts'
import { suggestConfigKeys } from './suggest.ts'
import { visible } from './transcript.ts'

declare module 'cordis' {
  interface Events {
    /** Emitted by the loader when an entry cannot be imported or created (this: the entry's context). */
    'internal/error'(this: Context, error: unknown): void
    'internal/warn'(this: Context, error: unknown): void
  }
}

export type LogLevel = 'error' | 'warn' | 'info' | 'debug'

/** Cordis logger levels (`LoggerLevel`: ERROR 0 … DEBUG 3). */
const LEVELS: Record<LogLevel, number> = { error: 0, warn: 1, info: 2, debug: 3 }

export interface BootOptions {
  /** Where diagnostics go. Default: `process.stderr`. */
  stderr?: NodeJS.WritableStream
  /** Least severe level printed. Default: `warn`. Errors print their stack at `debug`. */
  logLevel?: LogLevel
}

export interface App {
  /** The root context; services are read with `ctx.get(name)`. */
  readonly ctx: Context
  readonly composition: Composition
  /** Enabled entry ids in file order (group children right after their group). */
  readonly entries: readonly string[]
  /**
   * The code this composition runs from outside conch's installation — its local plugins and
   * their import closure (`localCodePaths`), canonical: no confined terminal may write a folder
   * holding any of it.
   */
  readonly code: readonly string[]
  /**
   * Disposes every entry in reverse file order, awaiting each, then the loader. Idempotent:
   * later calls return the same promise. Never rejects (dispose errors are logged).
   */
  shutdown(): Promise<void>
}

/**
 * Boots `composition` (rows already patched and env-interpolated). Imports every enabled
 * plugin first; if any cannot be imported nothing is started.
 * @throws BootError listing each enabled entry that is not active, with the reason — the import
 *   error, the config ValidationError (field paths), the failure of its apply, or the services
 *   it waits for — after disposing whatever did start.
 */
export async function boot(composition: Composition, options: BootOptions = {}): Promise<App> {
  const stderr = options.stderr ?? process.stderr
  const level = options.logLevel ?? 'warn'
  const rows = enabledRows(composition.entries)

  // What local plugins import is host code the next boot runs too: record it (see closure.ts),
  // from the first import until every entry has started, to protect it with them.
  const recording: ClosureRecording | undefined = localPluginPaths(composition).length > 0 ? recordResolutions(importByUrl) : undefined
  try {
    return await bootRecorded(composition, stderr, level, rows, recording)
  } finally {
    // Stopped already on success; stopped here when the boot failed on the way.
    await recording?.stop()
  }
}

async function bootRecorded(
  composition: Composition,
  stderr: NodeJS.WritableStream,
  level: LogLevel,
  rows: readonly EntryRow[],
  recording: ClosureRecording | undefined,
): Promise<App> {
  const prepared = await preparePlugins(composition.entries)
  if (prepared.failures.length) throw new BootError(composition.file, prepared.failures)

  const ctx = new Context()
  const loaderRef: { loader?: Loader } = {}
  const locate = (fiber: Fiber<Context> | undefined) => (fiber && loaderRef.loader ? loaderRef.loader.locate(fiber) : undefined)
  // Until the audit, logged errors and `internal/error`s are held back so the BootError does not
  // repeat them; those it does not report are printed after it.
  const held: { error: unknown; print: () => void }[] = []
  let holding = true
  const exporter: Exporter = {
    colors: false,
    levels: { default: LEVELS[level] },
    export: (message) => {
      const print = () => stderr.write(visible(`${formatMessage(exporter, message, level, locate)}\n`))
      const [error] = message.args
      if (holding && message.type === 'error' && message.args.length === 1 && error instanceof Error) held.push({ error, print })
      else print()
    },
  }
  ctx.logger.exporter(exporter)
  const releaseHeld = (reported: readonly unknown[]) => {
    holding = false
    for (const { error, print } of held.splice(0)) if (!isReported(error, reported)) print()
  }

  const internalErrors = new Map<string, unknown[]>()
  const unattributed: unknown[] = []
  const logger = ctx.logger('loader')
  ctx.on('internal/error', function (this: Context | undefined, error: unknown) {
    const id = entryOf(this)?.options.id
    if (id) internalErrors.set(id, [...(internalErrors.get(id) ?? []), error])
    else unattributed.push(error)
    const print = () => logger.error('%s%s', id ? `entry ${id}: ` : '', describeError(error, level))
    if (holding) held.push({ error, print })
    else print()
  })
  ctx.on('internal/warn', function (this: Context | undefined, error: unknown) {
    const id = entryOf(this)?.options.id
    logger.warn('%s%s', id ? `entry ${id}: ` : '', describeError(error, level))
  })

  // A config that fails validation also rejects a promise nobody awaits (the loader's
  // `fiber.await()`); the audit reports it, so only rejections nobody reports are printed.
  const fiberErrors = (): unknown[] => rows.map((row) => fiberError(loaderRef.loader, row.id)).filter((error) => error !== undefined)
  const onRejection = (reason: unknown) => {
    if (fiberErrors().includes(reason)) return
    logger.error('unhandled rejection: %s', describeError(reason, level))
  }
  process.on('unhandledRejection', onRejection)

  const loaderFiber = await ctx.plugin(Loader, { baseUrl: pathToFileURL(dirname(composition.file)).href + '/' })
  const loader = ctx.get('loader') as Loader
  loaderRef.loader = loader
  loader.builtins['group'] = Group
  for (const [name, exports] of prepared.builtins) loader.builtins[name] = exports

  let stopping: Promise<void> | undefined
  const shutdown = () =>
    (stopping ??= (async () => {
      for (const row of [...rows].reverse()) {
        const fiber = entryById(loader, row.id)?.fiber
        if (!fiber) continue
        try {
          await fiber.dispose()
        } catch (error) {
          logger.error('entry %s: dispose failed: %s', row.id, describeError(error, level))
        }
      }
      try {
        await loaderFiber.dispose()
      } catch (error) {
        logger.error('loader dispose failed: %s', describeError(error, level))
      }
      // Let rejections left by failed fibers surface (one macrotask later) while still known.
      await new Promise((resolve) => setImmediate(resolve))
      process.off('unhandledRejection', onRejection)
    })())

  let failures: EntryFailure[] = []
  let resolutions: Resolution[] = []
  try {
    await loader.root.update(prepared.options)
    await loader.await()
    resolutions = (await recording?.stop()) ?? []
    failures = audit(loader, rows, internalErrors, unattributed)
  } finally {
    releaseHeld(failures.flatMap((failure) => failure.errors ?? []))
  }
  if (failures.length) {
    await shutdown()
    throw new BootError(composition.file, failures)
  }
  // Before any agent runs (see protect.ts): the composition's files and code stay read-only in every
  // sandbox, and the local plugins with what they import also stay out of every writable path.
  const sandbox = ctx.get('sandbox') as SandboxServiceApi | undefined
  sandbox?.protect?.(protectedPathsOf(composition, resolutions))
  const code = localCodePaths(composition, resolutions)
  if (code.length > 0) sandbox?.protect?.(code, { code: true })
  const canonicalCode = code.flatMap((path) => realpathOf(path) ?? [])
  return { ctx, composition, entries: rows.map((row) => row.id), code: canonicalCode, shutdown }
}

/** Every enabled row must have an active fiber; otherwise say why, in file order. */
function audit(
  loader: Loader,
  rows: readonly EntryRow[],
  internalErrors: ReadonlyMap<string, unknown[]>,
  unattributed: readonly unknown[],
): EntryFailure[] {
  const failures: EntryFailure[] = []
  /** For each missing-services failure: the entry whose fiber registered each service, if one did. */
  const registeredProviders = new Map<EntryFailure, (string | undefined)[]>()
  const unstarted = rows.filter((row) => !entryById(loader, row.id)?.fiber)
  for (const row of rows) {
    const base = { id: row.id, name: row.name }
    const fiber = entryById(loader, row.id)?.fiber
    if (!fiber) {
      // Errors the loader could not pin to an entry belong to the only unstarted one, if only one.
      const errors = internalErrors.get(row.id) ?? (unstarted.length === 1 ? unattributed : [])
      const message = errors.map((error) => describeError(error, 'warn')).join('\n')
      failures.push({ ...base, reason: 'not-started', message: message || 'the loader did not start it (see the errors above)', errors: [...errors] })
      continue
    }
    const error = fiberError(loader, row.id)
    if (error !== undefined) {
      if (error instanceof Error && error.name === 'ValidationError') {
        // Cordis prints an issue at the config's top level (an unknown key there) as `(at )`.
        const message = error.message.replace(/ \(at \)$/gm, ' (at the top level)')
        const schema = (fiber.runtime as { Config?: unknown } | null)?.Config
        failures.push({ ...base, reason: 'invalid-config', message: suggestConfigKeys(message, schema, row.config), errors: [error] })
      } else {
        failures.push({ ...base, reason: 'failed', message: `failed to start: ${describeError(error, 'warn')}`, errors: [error] })
      }
      continue
    }
    if (fiber.state === FIBER_ACTIVE) continue
    const missing = Object.keys(fiber.inject).filter((name) => !serviceProvider(fiber.ctx, name, true))
    if (missing.length) {
      const providers = missing.map((name) => {
        const impl = serviceProvider(fiber.ctx, name, false)
        return impl ? loader.locate(impl.fiber) : undefined
      })
      const failure: EntryFailure = { ...base, reason: 'missing-services', services: missing, message: '' }
      registeredProviders.set(failure, providers)
      failures.push(failure)
    } else {
      failures.push({ ...base, reason: 'not-started', message: 'not active after loading' })
    }
  }
  // A service nobody registered because its entry did not start: that entry is named when its
  // package is the service's by conch's naming (`@conch/sandbox-policy` provides `sandboxPolicy`).
  for (const failure of failures) {
    if (failure.reason !== 'missing-services') continue
    const details = failure.services.map((name, index) => {
      const provider = registeredProviders.get(failure)?.[index]
      if (provider) return `${name} (from entry "${provider}", which is not active)`
      const failed = failures.find((other) => other !== failure && serviceNameOf(other.name) === name)
      if (failed === undefined) return `${name} (no active entry provides it)`
      const why = failed.reason === 'invalid-config' ? 'whose config is invalid' : failed.reason === 'failed' ? 'which failed to start' : 'which is not active'
      return `${name} (from entry "${failed.id}", ${why})`
    })
    failure.message = `waits for services that are not available: ${details.join(', ')}`
  }
  return failures
}

/** The service a conch package provides by its name: `@conch/sandbox-policy` → `sandboxPolicy`; undefined for a path. */
function serviceNameOf(packageName: string): string | undefined {
  const match = /^@[^/]+\/([a-z0-9-]+)$/.exec(packageName)
  return match?.[1]!.replace(/-([a-z0-9])/g, (_, letter: string) => letter.toUpperCase())
}

/** Whether the audit reported `error`, or an error it reported was caused by it (cordis logs a cause before its error). */
function isReported(error: unknown, reported: readonly unknown[]): boolean {
  for (let item of reported) {
    for (let depth = 0; item !== undefined && depth < 8; depth++) {
      if (item === error) return true
      item = item instanceof Error ? item.cause : undefined
    }
  }
  return false
}

function entryById(loader: Loader | undefined, id: string) {
  if (!loader) return undefined
  try {
    return loader.resolve(id)
  } catch {
    return undefined
  }
}

/** The error the fiber of entry `id` failed with, read for the audit. */
function fiberError(loader: Loader | undefined, id: string): unknown {
  return errorOfFiber(entryById(loader, id)?.fiber)
}

/** `message` (and its stack at debug level). */
export function describeError(error: unknown, level: LogLevel): string {
  if (!(error instanceof Error)) return String(error)
  if (level === 'debug' && error.stack) return error.stack
  if (error instanceof CliError) return error.message
  return error.name && error.name !== 'Error' && !error.message.startsWith(error.name) ? `${error.name}: ${error.message}` : error.message
}

/** `[level] label: text`, continuation lines indented; the label is the entry id when known. */
function formatMessage(
  exporter: Exporter,
  message: Message,
  level: LogLevel,
  locate: (fiber: Fiber<Context> | undefined) => string | undefined,
): string {
  const args = message.args.map((arg) => (arg instanceof Error ? describeError(arg, level) : arg))
  const text = Logger.format(exporter, { ...message, args })
  const entry = locate(message.fiber?.deref())
  const label = entry && entry !== message.name ? `${message.name} (${entry})` : message.name
  return `[${message.type}] ${label}: ${text.split('\n').join('\n    ')}`
}
