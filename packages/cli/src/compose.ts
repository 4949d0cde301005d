/**
 * Reading a composition: a `cordis.yml` is either a YAML list of entries, or an overlay — a
 * mapping that names a `base` file and a list of `patches` (insert a row, or patch a row by
 * `id`). Overlays may stack. The result is one flat-in-order list of rows, each remembering
 * the file that wrote it (for `./` plugin names and for error messages). See
 * docs/configuration.md for the format.
 */
import { readFileSync } from 'node:fs'
import { dirname, relative, resolve } from 'node:path'
import { parse as parseYaml } from 'yaml'
import { z } from 'zod'
import { CliError } from './errors.ts'
import { didYouMean, objectKeys } from './suggest.ts'

/** One row of a composition, as the loader's `EntryOptions` plus where it was written. */
export interface EntryRow {
  id: string
  /** A package name, a `./` path relative to `source`, an absolute path or URL, or `cordis:group`. */
  name: string
  config?: unknown
  disabled?: boolean
  group?: boolean
  inject?: string[] | Record<string, unknown>
  isolate?: Record<string, true | string>
  /** Absolute path of the file that wrote this row. */
  source: string
  /** Rows of a `group: true` entry (its `config` in the file). */
  children?: EntryRow[]
}

export interface Composition {
  /** Absolute path of the file that was read (the top overlay, if any). */
  file: string
  /** Every file read, the top one first, then each base. */
  files: string[]
  entries: EntryRow[]
}

/** Entry ids address rows in patches and the loader's tree; `:` separates subtree ids there. */
const ID = /^[A-Za-z0-9_][A-Za-z0-9_.-]*$/

const RowSchema = z
  .strictObject({
    id: z.string().regex(ID, 'ids use letters, digits, "_", "." and "-", and start with a letter, digit or "_"'),
    name: z.string().min(1).optional(),
    config: z.unknown().optional(),
    disabled: z.boolean().nullable().optional(),
    group: z.boolean().nullable().optional(),
    inject: z.union([z.array(z.string()), z.record(z.string(), z.unknown())]).nullable().optional(),
    isolate: z.record(z.string(), z.union([z.literal(true), z.string()])).nullable().optional(),
  })

const InsertSchema = z
  .strictObject({
    insert: z.unknown(),
    after: z.string().optional(),
    before: z.string().optional(),
  })
  .refine((patch) => patch.after === undefined || patch.before === undefined, {
    message: 'give either after or before, not both',
  })

const PatchSchema = z.strictObject({
  patch: z.string(),
  config: z.unknown().optional(),
  disabled: z.boolean().optional(),
})

const OverlaySchema = z.strictObject({
  base: z.string().min(1),
  patches: z.array(z.unknown()).nullable().optional(),
})

/** A patch, as written in an overlay or built by the command line (e.g. `--script`). */
export type Patch =
  | { insert: unknown; after?: string; before?: string }
  | { patch: string; config?: unknown; disabled?: boolean }

/**
 * Reads a composition file and every base it stacks on.
 * @throws CliError `CONFIG_INVALID`, `UNKNOWN_ENTRY`, `DUPLICATE_ENTRY`, `OVERLAY_CYCLE` — each
 *   message names the file and the entry or patch.
 */
export function readComposition(file: string): Composition {
  const path = resolve(file)
  const { entries, files } = readFile(path, [])
  return { file: path, files, entries }
}

function readFile(path: string, including: readonly string[]): { entries: EntryRow[]; files: string[] } {
  if (including.includes(path)) {
    throw new CliError('OVERLAY_CYCLE', { files: [...including, path].map((file) => display(file)) })
  }
  let text: string
  try {
    text = readFileSync(path, 'utf8')
  } catch (error) {
    const reason = (error as NodeJS.ErrnoException).code === 'ENOENT' ? 'no such file' : (error as Error).message
    const from = including.length ? ` (the base of ${display(including[including.length - 1]!)})` : ''
    const hint = including.length === 0 && reason === 'no such file' ? '; give the composition with --config FILE' : ''
    throw new CliError('CONFIG_INVALID', { reason: `cannot read ${display(path)}${from}: ${reason}${hint}` })
  }
  let document: unknown
  try {
    document = parseYaml(text)
  } catch (error) {
    throw new CliError('CONFIG_INVALID', { reason: `${display(path)} is not valid YAML: ${(error as Error).message}` })
  }
  if (Array.isArray(document)) {
    const entries = parseRows(document, path, [])
    checkUniqueIds(entries, path)
    return { entries, files: [path] }
  }
  if (isObject(document) && 'base' in document) {
    const overlay = OverlaySchema.safeParse(document)
    if (!overlay.success) throw invalid(path, 'the overlay', overlay.error, OverlaySchema)
    const basePath = resolve(dirname(path), overlay.data.base)
    const base = readFile(basePath, [...including, path])
    const entries = applyPatches(base.entries, overlay.data.patches ?? [], path)
    return { entries, files: [path, ...base.files] }
  }
  throw new CliError('CONFIG_INVALID', { reason: `${display(path)} must be a YAML list of entries ({id, name, config, …}) or an overlay mapping with base and patches` })
}

/**
 * Applies patches in order to a copy of `entries`. Rows that patches insert are written by
 * `source`, so their `./` names resolve against its folder.
 * @throws CliError `CONFIG_INVALID` (a malformed patch), `UNKNOWN_ENTRY`, `DUPLICATE_ENTRY`.
 */
export function applyPatches(entries: readonly EntryRow[], patches: readonly unknown[], source: string): EntryRow[] {
  const result = cloneRows(entries)
  patches.forEach((raw, index) => {
    const where = `${display(source)}: patches[${index}]`
    if (isObject(raw) && 'insert' in raw) {
      const parsed = InsertSchema.safeParse(raw)
      if (!parsed.success) throw invalid(source, `patches[${index}]`, parsed.error, InsertSchema)
      const [row] = parseRows([parsed.data.insert], source, [], `patches[${index}].insert`)
      const anchor = parsed.data.after ?? parsed.data.before
      if (anchor === undefined) {
        result.push(row!)
      } else {
        const found = findRow(result, anchor)
        if (!found) throw unknownId(where, anchor, result)
        found.list.splice(found.index + (parsed.data.after === undefined ? 0 : 1), 0, row!)
      }
      checkUniqueIds(result, source)
    } else if (isObject(raw) && 'patch' in raw) {
      const parsed = PatchSchema.safeParse(raw)
      if (!parsed.success) throw invalid(source, `patches[${index}]`, parsed.error, PatchSchema)
      const found = findRow(result, parsed.data.patch)
      if (!found) throw unknownId(where, parsed.data.patch, result)
      const row = found.list[found.index]!
      if ('config' in parsed.data) setConfig(row, parsed.data.config, source, `patches[${index}].config`)
      if (parsed.data.disabled !== undefined) row.disabled = parsed.data.disabled
    } else {
      throw new CliError('CONFIG_INVALID', { reason: `${where}: a patch is either {insert: {id, name, …}, after?: id, before?: id} or {patch: id, config?, disabled?}` })
    }
  })
  return result
}

/** Depth-first rows in file order, group children right after their group. */
export function flattenRows(entries: readonly EntryRow[]): EntryRow[] {
  return entries.flatMap((row) => [row, ...flattenRows(row.children ?? [])])
}

/** The row with `id` anywhere in the tree, or undefined. */
export function findRow(entries: EntryRow[], id: string): { list: EntryRow[]; index: number } | undefined {
  for (let index = 0; index < entries.length; index++) {
    const row = entries[index]!
    if (row.id === id) return { list: entries, index }
    const inner = row.children && findRow(row.children, id)
    if (inner) return inner
  }
  return undefined
}

function parseRows(items: readonly unknown[], source: string, parents: readonly string[], label?: string): EntryRow[] {
  return items.map((item, index) => {
    const where = label ?? `${parents.length ? `group "${parents.join('/')}" ` : ''}entry #${index + 1}`
    const parsed = RowSchema.safeParse(item)
    if (!parsed.success) {
      const id = isObject(item) && typeof item['id'] === 'string' ? ` "${item['id']}"` : ''
      throw invalid(source, `${where}${id}`, parsed.error, RowSchema)
    }
    const data = parsed.data
    const group = data.group === true
    const name = data.name ?? (group ? 'cordis:group' : undefined)
    if (name === undefined) {
      throw new CliError('CONFIG_INVALID', { reason: `${display(source)}: ${where} "${data.id}": name is required (a package such as @conch/tasks, or ./file.ts)` })
    }
    const row: EntryRow = { id: data.id, name, source }
    if (data.disabled != null) row.disabled = data.disabled
    if (group) row.group = true
    if (data.inject != null) row.inject = data.inject
    if (data.isolate != null) row.isolate = data.isolate
    setConfig(row, data.config, source, `${where} "${data.id}".config`, parents)
    return row
  })
}

function setConfig(row: EntryRow, config: unknown, source: string, where: string, parents: readonly string[] = []): void {
  delete row.config
  delete row.children
  if (row.group) {
    if (config == null) {
      row.children = []
    } else if (Array.isArray(config)) {
      row.children = parseRows(config, source, [...parents, row.id])
    } else {
      throw new CliError('CONFIG_INVALID', { reason: `${display(source)}: ${where}: the config of a group is a list of entries` })
    }
  } else if (config != null) {
    row.config = config
  }
}

function checkUniqueIds(entries: readonly EntryRow[], source: string): void {
  const seen = new Map<string, EntryRow>()
  for (const row of flattenRows(entries)) {
    const first = seen.get(row.id)
    if (first) {
      const where = first.source === row.source ? display(row.source) : `${display(first.source)} and ${display(row.source)}`
      throw new CliError('DUPLICATE_ENTRY', { where, id: row.id, checkedIn: display(source) })
    }
    seen.set(row.id, row)
  }
}

function cloneRows(entries: readonly EntryRow[]): EntryRow[] {
  return entries.map((row) => {
    const copy: EntryRow = { ...row }
    if (row.children) copy.children = cloneRows(row.children)
    return copy
  })
}

function unknownId(where: string, id: string, entries: readonly EntryRow[]): CliError {
  return new CliError('UNKNOWN_ENTRY', { where, id, ids: flattenRows(entries).map((row) => row.id) })
}

/** `CONFIG_INVALID` naming each issue; an unknown key gets the nearest key of `schema` there. */
function invalid(source: string, where: string, error: z.ZodError, schema: z.ZodType): CliError {
  const issues = error.issues.map((issue) => {
    const path = issue.path.length ? `${issue.path.map(String).join('.')}: ` : ''
    const hint = issue.code === 'unrecognized_keys' ? didYouMean(issue.keys, objectKeys(schema, issue.path) ?? []) : ''
    return `${path}${issue.message}${hint}`
  })
  return new CliError('CONFIG_INVALID', { reason: `${display(source)}: ${where}: ${issues.join('; ')}` })
}

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value)
}

/** A path as a person would type it from the current directory. */
export function display(path: string): string {
  const rel = relative(process.cwd(), path)
  return rel && !rel.startsWith('..') && !rel.startsWith('/') ? rel : path
}
