/**
 * The one place conch reaches into Cordis beyond its public API (cordis 4.0.0-rc.10): a fiber's
 * failure, the loader entry behind a context, the service implementation a context resolves, and
 * the value of the `FiberState.ACTIVE` const enum. A Cordis upgrade changes these here only.
 * Exported as `@conch/session/cordis-internals` (a seam: every package may import it).
 */
import type { Context, Fiber } from 'cordis'

/** `FiberState.ACTIVE` (a const enum in cordis' typings, so not importable under isolatedModules). */
export const FIBER_ACTIVE = 2

/** The error a fiber failed with (the private `_error` of cordis' Fiber); undefined when none. */
export function fiberError(fiber: Fiber<Context> | undefined): unknown {
  return (fiber as { _error?: unknown } | undefined)?._error
}

const ENTRY = Symbol.for('cordis.entry')

/** The loader entry a context belongs to (`@cordisjs/plugin-loader` keys it by `Symbol.for('cordis.entry')`). */
export function entryOf(ctx: Context | undefined): { options: { id: string } } | undefined {
  return (ctx as unknown as Record<symbol, { options: { id: string } } | undefined> | undefined)?.[ENTRY]
}

/**
 * The fiber that provides service `name` as `ctx` sees it (`ctx.reflect._getImpl`): with `active`,
 * only a provider whose fiber is active; without, any registered one.
 */
export function serviceProvider(ctx: Context, name: string, active: boolean): { fiber: Fiber<Context> } | undefined {
  return (ctx.reflect as unknown as { _getImpl(name: string, strict: boolean): { fiber: Fiber<Context> } | undefined })._getImpl(name, active)
}
