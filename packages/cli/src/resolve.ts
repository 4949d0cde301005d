/**
 * Turning a row's `name` into what the loader imports, always an absolute URL (the loader's own
 * folder has no `@conch` package): bare names resolve from this package, `./` paths against the
 * file that wrote the row, absolute paths and URLs as they are. Every enabled plugin is imported
 * here first, so a bad one is reported against its entry before any process starts.
 */
import { isAbsolute } from 'node:path'
import { pathToFileURL } from 'node:url'
import type { EntryOptions } from '@cordisjs/plugin-loader'
import { messageOf } from '@conch/session'
import { flattenRows, type EntryRow } from './compose.ts'
import type { EntryFailure } from './errors.ts'

export const GROUP = 'cordis:group'

/**
 * Plugins compiled into the built bin (see `bundle.ts`), by package name; empty when conch runs
 * from its sources. A row naming one is loaded from the build as the loader builtin
 * `cordis:<name>` instead of being imported by URL.
 */
const builtinPlugins = new Map<string, () => Promise<unknown>>()
/** Called once before a `./` plugin written in TypeScript is imported (the built bin loads tsx then). */
let beforeTypeScriptImport: (() => Promise<void>) | undefined
/** Imports a plugin module by URL (the built bin's comes from bin/conch.js). */
let importModule = (url: string): Promise<unknown> => import(url)

/**
 * Registers the built bin's plugin table, its TypeScript loader and its importer of modules
 * outside the build (see `bundle.ts`).
 */
export function useBuiltinPlugins(
  table: Record<string, () => Promise<unknown>>,
  loadTypeScript?: () => Promise<void>,
  importer?: (url: string) => Promise<unknown>,
): void {
  for (const [name, load] of Object.entries(table)) builtinPlugins.set(name, load)
  beforeTypeScriptImport = loadTypeScript
  if (importer) importModule = importer
}

/** Imports a module by URL the way plugin modules are imported (in the built bin: bin/conch.js's `import()`). */
export const importByUrl = (url: string): Promise<unknown> => importModule(url)

/** The URL the loader imports for `row`. Throws the resolution error for an unknown package. */
export function resolvePluginUrl(row: EntryRow): string {
  const { name } = row
  if (name === GROUP) return name
  if (builtinPlugins.has(name)) return `cordis:${name}`
  if (name.startsWith('.')) return new URL(name, pathToFileURL(row.source)).href
  if (isAbsolute(name)) return pathToFileURL(name).href
  if (/^[a-z][a-z0-9+.-]*:/i.test(name) && !name.startsWith('@')) return name
  return import.meta.resolve(name)
}

/**
 * Resolves and imports every enabled row's plugin. Returns the loader's entries (the same tree
 * with absolute names; disabled rows left out) and one failure per row that cannot be loaded.
 */
export async function preparePlugins(
  entries: readonly EntryRow[],
): Promise<{ options: EntryOptions[]; failures: EntryFailure[]; builtins: Map<string, unknown> }> {
  const failures: EntryFailure[] = []
  const builtins = new Map<string, unknown>()
  const urls = new Map<EntryRow, string>()
  await Promise.all(
    enabledRows(entries).map(async (row) => {
      let url: string
      try {
        url = resolvePluginUrl(row)
      } catch (error) {
        failures.push({ id: row.id, name: row.name, reason: 'import', message: `cannot resolve ${row.name}: ${messageOf(error)}` })
        return
      }
      urls.set(row, url)
      if (url === GROUP) return
      let exports: unknown
      try {
        const builtin = url.startsWith('cordis:') ? builtinPlugins.get(row.name) : undefined
        if (builtin) {
          exports = await builtin()
          builtins.set(url.slice('cordis:'.length), exports)
        } else {
          if (beforeTypeScriptImport && /\.[cm]?tsx?$/.test(url)) await beforeTypeScriptImport()
          exports = await importModule(url)
          // The loader gets the module itself too, as the builtin `cordis:<url>`: it never
          // imports anything on its own (the built bin has no import() of its own to give it).
          builtins.set(url, exports)
          urls.set(row, `cordis:${url}`)
        }
      } catch (error) {
        failures.push({ id: row.id, name: row.name, reason: 'import', message: `cannot import ${row.name}: ${messageOf(error)}` })
        return
      }
      if (!isPlugin(unwrap(exports))) {
        failures.push({
          id: row.id,
          name: row.name,
          reason: 'not-a-plugin',
          message:
            `${row.name} does not export a Cordis plugin: expected a default-exported class or function, ` +
            'or a namespace with apply (and no default export)',
        })
      }
    }),
  )
  const order = flattenRows(entries).map((row) => row.id)
  failures.sort((a, b) => order.indexOf(a.id) - order.indexOf(b.id))
  return { options: toOptions(entries, urls), failures, builtins }
}

function toOptions(entries: readonly EntryRow[], urls: ReadonlyMap<EntryRow, string>): EntryOptions[] {
  return entries
    .filter((row) => !row.disabled)
    .map((row) => {
      const options: EntryOptions = { id: row.id, name: urls.get(row) ?? row.name }
      if (row.group) {
        options.group = true
        options.config = toOptions(row.children ?? [], urls)
      } else if (row.config !== undefined) {
        options.config = row.config
      }
      if (row.inject) options.inject = row.inject
      if (row.isolate) options.isolate = row.isolate
      return options
    })
}

/** Enabled rows in file order; a row inside a disabled group is disabled too. */
export function enabledRows(entries: readonly EntryRow[]): EntryRow[] {
  return entries.filter((row) => !row.disabled).flatMap((row) => [row, ...enabledRows(row.children ?? [])])
}

/** What the loader does with a module namespace (`Loader.unwrapExports`). */
function unwrap(exports: unknown): unknown {
  if (exports === null || typeof exports !== 'object') return exports
  const value = (exports as { default?: unknown }).default ?? exports
  if (value && typeof value === 'object' && (value as { __esModule?: unknown }).__esModule) {
    return (value as { default?: unknown }).default ?? value
  }
  return value
}

function isPlugin(value: unknown): boolean {
  if (typeof value === 'function') return true
  return typeof value === 'object' && value !== null && typeof (value as { apply?: unknown }).apply === 'function'
}

