/**
 * Every YAML sample in the documentation (the root README, docs/, every package's README) is
 * loaded as what its fence says it is, so a sample cannot rot:
 *
 * - ```` ```yaml composition ````: a `cordis.yml`, or rows of one. Read by the boot's composition
 *   reader; every row's plugin resolved and imported as the boot does, and its `config` checked by
 *   that plugin's own schema (`@conch/pty-pool`: `loadPoolConfig`).
 * - ```` ```yaml overlay ````: an overlay. Its `base` is looked up by file name: `cordis.yml` is the
 *   root `cordis.yml`, any other name an overlay before it in the same document (named by its
 *   leading `# name.yml` comment); then read, patched and checked like a composition.
 * - ```` ```yaml other ````: neither (one plugin's config section, a file of another program);
 *   parsed as YAML only.
 *
 * A YAML fence that declares none of the three fails, naming the file and line.
 */
import { copyFileSync, existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import path from 'node:path'
import { fileURLToPath } from 'node:url'
import { afterAll, describe, expect, it } from 'vitest'
import { parse as parseYaml } from 'yaml'
import { BUILTIN_KINDS, loadPoolConfig } from '@conch/pty-pool'
import { flattenRows, readComposition } from '../src/compose.ts'
import { enabledRows, preparePlugins, resolvePluginUrl } from '../src/resolve.ts'

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../../..')

function readmes(dir: string): string[] {
  const found: string[] = []
  for (const entry of readdirSync(dir)) {
    if (entry === 'node_modules' || entry.startsWith('.')) continue
    const full = path.join(dir, entry)
    if (statSync(full).isDirectory()) found.push(...readmes(full))
    else if (entry === 'README.md') found.push(full)
  }
  return found
}

const documents = [path.join(root, 'README.md'), ...readdirSync(path.join(root, 'docs')).filter((name) => name.endsWith('.md')).map((name) => path.join(root, 'docs', name)), ...readmes(path.join(root, 'packages'))]

interface Block {
  file: string
  line: number
  role: string
  text: string
}

/** The YAML fences of a Markdown file, with the role word after `yaml`. */
function yamlBlocks(file: string): Block[] {
  const blocks: Block[] = []
  const lines = readFileSync(file, 'utf8').split('\n')
  for (let index = 0; index < lines.length; index++) {
    const open = /^(\s*)(`{3,})ya?ml\b\s*(\S*)/.exec(lines[index]!)
    if (!open) continue
    const body: string[] = []
    let end = index + 1
    for (; end < lines.length && !lines[end]!.trimStart().startsWith(open[2]!); end++) body.push(lines[end]!.slice(open[1]!.length))
    blocks.push({ file: path.relative(root, file), line: index + 1, role: open[3]!, text: body.join('\n') })
    index = end
  }
  return blocks
}

const blocks = documents.flatMap(yamlBlocks)
/** The root `cordis.yml`, copied beside the samples: the base an overlay names as `…/cordis.yml`. */
const ROOT_COPY = 'root.cordis.yml'
const scratch = mkdtempSync(path.join(tmpdir(), 'readme-yaml-'))
afterAll(() => rmSync(scratch, { recursive: true, force: true }))

/** Imports every row's plugin as the boot does and checks its config with the plugin's schema. */
async function checkRows(file: string): Promise<void> {
  const { entries } = readComposition(file)
  // A `./` plugin of a sample is the reader's own file, not in the repository.
  const rows = enabledRows(entries).filter((row) => !row.name.startsWith('.'))
  const { failures } = await preparePlugins(rows.map((row) => ({ ...row, children: [] })))
  expect(failures).toEqual([])
  for (const row of flattenRows(rows)) {
    if (row.group) continue
    const module = (await import(resolvePluginUrl(row))) as { name?: string; Config?: Schema; default?: { Config?: Schema } }
    if (row.name === '@conch/pty-pool') {
      // As `conch` loads it: the running bin is the managed worker's default argv.
      const config = (row.config ?? {}) as { worker?: string; supervisor?: Record<string, unknown> }
      const asConch = config.worker === 'managed' && config.supervisor?.command === undefined ? { ...config, supervisor: { ...config.supervisor, command: [process.execPath] } } : config
      expect(() => loadPoolConfig(asConch, {}, BUILTIN_KINDS), `${row.id}`).not.toThrow()
      continue
    }
    const schema = module.Config?.safeParse !== undefined ? module.Config : module.default?.Config
    if (schema?.safeParse === undefined) continue
    const parsed = schema.safeParse(row.config)
    expect(parsed.success ? [] : parsed.error.issues.map((issue) => `${row.id}.${issue.path.join('.')}: ${issue.message}`)).toEqual([])
  }
}

interface Schema {
  safeParse(value: unknown): { success: true } | { success: false; error: { issues: Array<{ path: PropertyKey[]; message: string }> } }
}

describe('YAML samples in the documentation', () => {
  it('are found', () => {
    expect(blocks.length).toBeGreaterThanOrEqual(20)
  })

  it.each(blocks.map((block) => [`${block.file}:${block.line} (${block.role || 'undeclared'})`, block] as const))('%s loads as what it declares', async (_name, block) => {
    expect(['composition', 'overlay', 'other'], 'the fence says what the block is: ```yaml composition, ```yaml overlay or ```yaml other').toContain(block.role)
    expect(() => parseYaml(block.text)).not.toThrow()
    if (block.role === 'other') return
    const folder = path.join(scratch, block.file.replace(/[/.]/g, '_'))
    if (!existsSync(folder)) {
      mkdirSync(folder)
      copyFileSync(path.join(root, 'cordis.yml'), path.join(folder, ROOT_COPY))
    }
    if (block.role === 'overlay') {
      const overlay = parseYaml(block.text) as { base?: unknown }
      expect(typeof overlay.base, 'an overlay names its base').toBe('string')
      const declared = path.basename(/^#\s*(\S+\.ya?ml)\b/.exec(block.text)?.[1] ?? 'cordis.yml')
      const file = path.join(folder, declared === 'cordis.yml' ? `overlay-${block.line}.yml` : declared)
      const base = path.basename(overlay.base as string)
      writeFileSync(file, block.text.replace(/^base:.*$/m, `base: ./${base === 'cordis.yml' ? ROOT_COPY : base}`))
      await checkRows(file)
      return
    }
    const file = path.join(folder, `composition-${block.line}.yml`)
    writeFileSync(file, block.text)
    await checkRows(file)
  })
})
