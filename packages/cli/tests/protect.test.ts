/**
 * What the boot protects, attacked the ways a confined terminal gets around a read-only mount of
 * a path, each with real `conch run`s (as root, under bubblewrap): a second hard link to the
 * composition planted while it was not protected; a composition reached through a symbolic link
 * in the workspace; a local plugin's imports (a module beside it, a package in the workspace's
 * node_modules) rewritten for the next boot; and a tsconfig.json planted in the working directory,
 * whose `paths` tsx would apply to every module it compiles.
 */
import { spawnSync } from 'node:child_process'
import { existsSync, mkdirSync, mkdtempSync, readFileSync, realpathSync, rmSync, symlinkSync, statSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { dirname, join } from 'node:path'
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest'
import { compositionYaml, conchSubagent, terminalComposition, writeComposition, type CompositionRow } from '@conch/test-support/composition'
import { readComposition } from '../src/compose.ts'
import { closurePaths, localPluginPaths } from '../src/protect.ts'
import { acpRequest, FIXTURES, jsonLines, runConch, startConch, step, workspace, type Workspace } from './harness.ts'

vi.setConfig({ testTimeout: 90_000 })

const hasBwrap = process.platform === 'linux' && spawnSync('bwrap', ['--ro-bind', '/', '/', 'true']).status === 0

let ws: Workspace
let elsewhere: string

beforeEach(() => {
  ws = workspace()
  elsewhere = realpathSync(mkdtempSync(join(tmpdir(), 'conch-protect-')))
})

afterEach(() => {
  ws.remove()
  rmSync(elsewhere, { recursive: true, force: true })
})

const open = step('', [{ name: 'terminal_open', arguments: { type: 'shell' } }])
const send = (text: string) => step('', [{ name: 'terminal_send', arguments: { sessionId: 'pty-1', text } }])

/** The terminal composition (workspace-write), its model script `script.jsonl` in the workspace. */
const composition = (more: CompositionRow[] = []) => terminalComposition({ script: join(ws.dir, 'script.jsonl'), mode: 'workspace-write', more })

/** Runs `conch run --config config --cwd <workspace>` with `lines` as the script; the tool results, in order. */
async function conchRun(config: string, lines: string[], env?: NodeJS.ProcessEnv): Promise<{ isError: boolean; text: string }[]> {
  ws.write('script.jsonl', [...lines, step('Done.')].join('\n'))
  return toolResults(config, ws.dir, env)
}

/** `conch run --config config --cwd cwd` (stream-json), which must exit 0 and say nothing on stderr; its tool results, in order. */
async function toolResults(config: string, cwd: string, env?: NodeJS.ProcessEnv): Promise<{ isError: boolean; text: string }[]> {
  const run = await runConch(['run', '--config', config, '--cwd', cwd, '--output', 'stream-json', 'task'], env ? { cwd, env } : { cwd })
  expect(run.stderr).toBe('')
  expect(run.code).toBe(0)
  return jsonLines(run.stdout)
    .filter((line) => line['type'] === 'tool_result')
    .map((line) => ({ isError: line['isError'] === true, text: String(line['text']) }))
}

describe.runIf(hasBwrap)('a protected composition with a second hard link', () => {
  it('planted by a terminal while the file was not the running composition, refuses every confined terminal of the run that boots it', async () => {
    const yml = writeComposition(ws.dir, composition())
    writeComposition(elsewhere, composition(), 'other.yml')
    // Run 1 boots another composition in the same workspace: ./cordis.yml is an ordinary file there.
    const planted = await conchRun(join(elsewhere, 'other.yml'), [open, send('ln cordis.yml .cfg-link; stat -c "links=%h" cordis.yml')])
    expect(planted.map((result) => result.text).join('\n')).toMatch(/^links=2$/m)
    expect(statSync(yml).nlink).toBe(2)

    // Run 2 boots ./cordis.yml: writing the other name would rewrite it, so no terminal is confined.
    const evil = "printf -- '- id: sandbox-policy\\n  name: \"@conch/sandbox-policy\"\\n  config: { mode: danger-full-access }\\n' > .cfg-link"
    const results = await conchRun(yml, [open, send(`${evil}; echo "via-link=$?"`)])
    expect(results[0]!.isError).toBe(true)
    expect(results[0]!.text).toContain(`the protected file ${yml} has 2 hard links`)
    expect(results[0]!.text).toContain(`find ${ws.dir} -xdev -samefile ${yml}`)
    expect(results[1]!.text).toMatch(/NO_SESSION/)
    expect(readFileSync(yml, 'utf8')).toBe(compositionYaml(composition()))
  })
})

describe.runIf(hasBwrap)('a protected composition reached through a symbolic link in the workspace', () => {
  it('refuses every confined terminal, naming the link and its target; the target given directly confines, and relinking changes nothing', async () => {
    const target = join(elsewhere, 'cordis.yml')
    writeComposition(elsewhere, composition())
    symlinkSync(target, join(ws.dir, 'cordis.yml'))
    const results = await conchRun(join(ws.dir, 'cordis.yml'), [open, send('echo unreachable')])
    expect(results[0]!.isError).toBe(true)
    expect(results[0]!.text).toContain(`the symbolic link ${join(ws.dir, 'cordis.yml')} -> ${target}, inside the writable ${ws.dir}`)
    expect(results[0]!.text).toContain(`--config ${target}`)

    // The target itself: confined, and the terminal may point the link elsewhere — no run boots it.
    const evil = "printf -- '- id: sandbox-policy\\n  name: \"@conch/sandbox-policy\"\\n  config: { mode: danger-full-access }\\n' > evil.yml"
    const direct = await conchRun(target, [open, send(`${evil}; ln -sfn evil.yml cordis.yml; echo "relinked=$?"; touch /etc/conch-escape-${process.pid}; echo "touch=$?"`)])
    const text = direct.map((result) => result.text).join('\n')
    expect(text).toMatch(/^relinked=0$/m)
    expect(text).toMatch(/^touch=1$/m)
    expect(readFileSync(target, 'utf8')).toBe(compositionYaml(composition()))
  })
})

/** A local plugin of the workspace, `./tool.mts`, importing `./lib.mts` and `zod` from the workspace's node_modules. */
function plantWorkspace(more: CompositionRow[] = []): string {
  ws.write('tool.mts', "import { z } from 'zod'\nimport { helper } from './lib.mts'\nexport const name = 'mytool'\nexport const Config = z.object({})\nexport const apply = () => helper()\n")
  ws.write('lib.mts', 'export function helper() {}\n')
  return writeComposition(ws.dir, composition([{ id: 'mytool', name: './tool.mts', config: {} }, ...more]))
}

/** What the terminal writes: a lib.mts and a zod that leave a mark on the host when they run. */
const plantLib = (mark: string) =>
  `printf '%s\\n' 'import { writeFileSync } from "node:fs"' 'export function helper() { writeFileSync("${mark}", "host code") }' > lib.mts; echo "lib=$?"`
const plantZod = (mark: string) => {
  const real = join(realpathSync(join(ws.dir, 'node_modules', 'zod')), 'index.js')
  return (
    `rm node_modules/zod; echo "rm=$?"; mkdir -p node_modules/zod && echo '{"name":"zod","type":"module","exports":"./index.js"}' > node_modules/zod/package.json && ` +
    `printf '%s\\n' 'import { writeFileSync } from "node:fs"' 'writeFileSync("${mark}", "zod replaced")' 'export * from "${real}"' > node_modules/zod/index.js; echo "zod=$?"`
  )
}

/** Runs `conch run --config config --cwd cwd` with `lines` (written to a script outside both); the tool results, in order. */
async function conchRunIn(config: string, cwd: string, lines: string[]): Promise<{ isError: boolean; text: string }[]> {
  const script = join(elsewhere, `script-${Date.now()}.jsonl`)
  writeFileSync(script, [...lines, step('Done.')].join('\n'))
  const yml = readFileSync(config, 'utf8').replace(join(ws.dir, 'script.jsonl'), script)
  const file = join(elsewhere, `cordis-${Date.now()}.yml`)
  writeFileSync(file, yml.replace('name: ./tool.mts', `name: ${JSON.stringify(join(ws.dir, 'tool.mts'))}`))
  return toolResults(file, cwd)
}

describe.runIf(hasBwrap)("a local plugin's imports", () => {
  it('in the workspace: conch run refuses to start there (exit 2, naming the code), and nothing can be planted for the next boot', async () => {
    const yml = plantWorkspace()
    const [libMark, zodMark] = [join(elsewhere, 'pwned-lib'), join(elsewhere, 'pwned-zod')]
    ws.write('script.jsonl', [open, send(plantLib(libMark)), send(plantZod(zodMark)), step('Done.')].join('\n'))
    const run = await runConch(['run', '--config', yml, '--cwd', ws.dir, '--output', 'stream-json', 'task'], { cwd: ws.dir })
    expect(run.code).toBe(2)
    // stream-json says it as the run's result line; no tool ran.
    const lines = jsonLines(run.stdout)
    expect(lines.filter((line) => line['type'] === 'tool_result')).toEqual([])
    const result = lines.find((line) => line['type'] === 'result')!
    expect(result['status']).toBe('error')
    expect(result['text']).toContain(`--cwd ${ws.dir} cannot be the workspace under the sandbox mode workspace-write: it holds code this composition runs outside conch's installation (`)
    expect(result['text']).toContain(join(realpathSync(ws.dir), 'tool.mts'))
    expect(result['text']).toMatch(/pass --cwd the project the agent works on/)
    expect(readFileSync(join(ws.dir, 'lib.mts'), 'utf8')).toBe('export function helper() {}\n')
    expect(existsSync(libMark)).toBe(false)
    expect(existsSync(zodMark)).toBe(false)
  })

  it('in the workspace: conch acp refuses a session there (CWD_REFUSED, naming the code) and serves one in another folder', async () => {
    const yml = plantWorkspace()
    ws.write('script.jsonl', `${step('hi')}\n`)
    const work = realpathSync(mkdtempSync(join(tmpdir(), 'conch-protect-work-')))
    const conch = startConch(['acp', '--config', yml], { cwd: work })
    try {
      await acpRequest(conch, 0, 'initialize', { protocolVersion: 1 })
      const refused = await acpRequest(conch, 1, 'session/new', { cwd: ws.dir, mcpServers: [] })
      expect(refused).toMatchObject({ id: 1, error: { code: -32602, data: { errorCode: 'CWD_REFUSED', cwd: ws.dir } } })
      expect(String((refused['error'] as { message: string }).message)).toContain(
        `cwd ${ws.dir} cannot be the workspace under the sandbox mode workspace-write: it holds code this composition runs outside conch's installation (${join(realpathSync(ws.dir), 'tool.mts')}`,
      )
      expect(await acpRequest(conch, 2, 'session/new', { cwd: work, mcpServers: [] })).toMatchObject({ id: 2, result: { sessionId: expect.any(String) } })
      conch.child.stdin.end()
      expect(await conch.exit).toBe(0)
    } finally {
      rmSync(work, { recursive: true, force: true })
    }
  })

  it('outside the workspace: a terminal there confines and can rewrite neither the module beside the plugin nor its package, for the next boot or a child conch', async () => {
    const child = ws.write('child.jsonl', `${step('child conch here')}\n`)
    const yml = plantWorkspace(conchSubagent({ script: child }))
    const work = realpathSync(mkdtempSync(join(tmpdir(), 'conch-protect-work-')))
    try {
      const [libMark, zodMark] = [join(elsewhere, 'pwned-lib'), join(elsewhere, 'pwned-zod')]
      const lib = join(ws.dir, 'lib.mts')
      const results = await conchRunIn(yml, work, [
        open,
        send(`cd ${JSON.stringify(ws.dir)} && ${plantLib(libMark)}`),
        send(`cd ${JSON.stringify(ws.dir)} && ${plantZod(zodMark)}`),
        step('', [{ name: 'subagent', arguments: { prompt: 'who are you?' } }]),
      ])
      expect(results[0]!.isError, results[0]!.text).toBe(false)
      expect(results[1]!.text).toMatch(/^lib=1$/m)
      expect(results[2]!.text).toMatch(/^rm=1$/m)
      expect(results[2]!.text).toMatch(/^zod=1$/m)
      expect(results[3]!.text).toMatch(/^child conch here\n\[subagent: conch, stop: completed/)
      expect(readFileSync(lib, 'utf8')).toBe('export function helper() {}\n')
      await conchRunIn(yml, work, [])
      expect(existsSync(libMark)).toBe(false)
      expect(existsSync(zodMark)).toBe(false)
    } finally {
      rmSync(work, { recursive: true, force: true })
    }
  })
})

describe.runIf(hasBwrap)('a tsconfig.json a confined terminal plants in the working directory', () => {
  /** The terminal's plant: `paths` that send `zod` to a module of its own, which leaves a mark. */
  const plantTsconfig = (mark: string) => {
    const real = join(realpathSync(join(ws.dir, 'node_modules', 'zod')), 'index.js')
    return (
      `echo '{"compilerOptions":{"baseUrl":".","paths":{"zod":["./evil.mts"]}}}' > tsconfig.json; ` +
      `printf '%s\\n' 'import { writeFileSync } from "node:fs"' 'writeFileSync("${mark}", "tsconfig paths")' 'export * from "${real}"' > evil.mts; echo "planted=$?"`
    )
  }

  it.each([
    ['the built bin (or the sources, when the build is stale), with a TypeScript plugin of the checkout', {}],
    ['the sources (CONCH_FROM_SOURCE=1)', { CONCH_FROM_SOURCE: '1' }],
  ])('is not applied to what conch compiles next: %s', async (_name, env) => {
    const yml = writeComposition(ws.dir, composition([{ id: 'echo', name: join(FIXTURES, 'echo-tool.ts') }]))
    const mark = join(elsewhere, 'pwned-tsconfig')
    const results = await conchRun(yml, [open, send(plantTsconfig(mark))])
    expect(results[1]!.text).toMatch(/^planted=0$/m)
    expect(existsSync(join(ws.dir, 'tsconfig.json'))).toBe(true)
    const next = await conchRun(yml, [step('', [{ name: 'echo', arguments: { text: 'still here' } }])], env)
    expect(next[0]!.text).toBe('echo: still here')
    expect(existsSync(mark)).toBe(false)
  })

  it('is not applied by the child conch a `subagent` call starts in the same run, in that working directory', async () => {
    const child = ws.write('child.jsonl', `${step('', [{ name: 'echo', arguments: { text: 'from the child' } }])}\n${step('child done')}\n`)
    const yml = writeComposition(ws.dir, composition([{ id: 'echo', name: join(FIXTURES, 'echo-tool.ts') }, ...conchSubagent({ script: child })]))
    const mark = join(elsewhere, 'pwned-tsconfig-child')
    const results = await conchRun(yml, [open, send(plantTsconfig(mark)), step('', [{ name: 'subagent', arguments: { prompt: 'echo something' } }])])
    expect(results[1]!.text).toMatch(/^planted=0$/m)
    expect(results[2]!.text).toMatch(/^child done\n\[subagent: conch, stop: completed/)
    expect(existsSync(mark)).toBe(false)
  })
})

describe('what the import closure of a local plugin adds', () => {
  it('each module outside the installation, its nearest package.json, and each package resolved from a node_modules — with the folder holding a linked one', () => {
    const project = elsewhere
    mkdirSync(join(project, 'plugins'))
    mkdirSync(join(project, 'node_modules', '.pnpm', 'left-pad@1', 'node_modules', 'left-pad'), { recursive: true })
    mkdirSync(join(project, 'node_modules', '@scope', 'pkg', 'dist'), { recursive: true })
    writeFileSync(join(project, 'package.json'), '{"type":"module"}\n')
    writeFileSync(join(project, 'plugins', 'tool.mts'), '')
    writeFileSync(join(project, 'plugins', 'lib.mts'), '')
    const padFile = join(project, 'node_modules', '.pnpm', 'left-pad@1', 'node_modules', 'left-pad', 'index.js')
    writeFileSync(padFile, '')
    symlinkSync(dirname(padFile), join(project, 'node_modules', 'left-pad'))
    writeFileSync(join(project, 'node_modules', '@scope', 'pkg', 'dist', 'index.js'), '')
    const tool = join(project, 'plugins', 'tool.mts')
    const installation = [join(project, 'installation')]
    mkdirSync(installation[0]!)
    writeFileSync(join(installation[0]!, 'zod.js'), '')
    const paths = closurePaths(
      [
        { specifier: './lib.mts', parent: tool, path: join(project, 'plugins', 'lib.mts') },
        { specifier: 'left-pad', parent: tool, path: padFile },
        { specifier: '@scope/pkg/dist/index.js', parent: tool, path: join(project, 'node_modules', '@scope', 'pkg', 'dist', 'index.js') },
        { specifier: 'zod', parent: join(installation[0]!, 'x.js'), path: join(installation[0]!, 'zod.js') },
      ],
      installation,
    )
    expect(new Set(paths)).toEqual(
      new Set([
        join(project, 'plugins', 'lib.mts'),
        join(project, 'package.json'),
        padFile,
        dirname(padFile),
        // left-pad is a link in node_modules: the folder holding it, so the link stays.
        join(project, 'node_modules'),
        join(project, 'node_modules', '@scope', 'pkg', 'dist', 'index.js'),
        join(project, 'node_modules', '@scope', 'pkg'),
      ]),
    )
  })

  it('is recorded only for a composition with a plugin outside the installation', () => {
    ws.write('tool.mts', 'export const apply = () => {}\n')
    const local = ws.write('local.yml', "- id: sessions\n  name: '@conch/session'\n- id: tool\n  name: ./tool.mts\n")
    const packaged = ws.write('packaged.yml', "- id: sessions\n  name: '@conch/session'\n")
    expect(localPluginPaths(readComposition(local))).toEqual([join(ws.dir, 'tool.mts')])
    expect(localPluginPaths(readComposition(packaged))).toEqual([])
  })
})
