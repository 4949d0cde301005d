/**
 * Running the real `conch` bin in a child process, in a temporary workspace whose plugins can
 * import `cordis` and `zod` (a `node_modules` link to this package's) and are ES modules.
 */
import { spawn, spawnSync, type ChildProcessWithoutNullStreams } from 'node:child_process'
import { copyFileSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs'
import { constants, tmpdir } from 'node:os'
import { dirname, join, resolve } from 'node:path'
import { fileURLToPath } from 'node:url'

const here = dirname(fileURLToPath(import.meta.url))
export const CLI_ROOT = resolve(here, '..')
export const BIN = join(CLI_ROOT, 'bin', 'conch.js')
export const FIXTURES = join(here, 'fixtures')

/**
 * The spine (sessions in memory) as YAML text, for the tests whose subject is the text itself (a
 * typo, an overlay, a variable); other compositions are rows (`@conch/test-support/composition`).
 */
export const SPINE = `- id: sessions
  name: '@conch/session'
- id: tools
  name: '@conch/tools'
- id: llm
  name: '@conch/llm'
- id: agents
  name: '@conch/agent'
`

export interface Workspace {
  dir: string
  /** Writes a file (relative to the workspace) and returns its absolute path. */
  write(name: string, text: string): string
  /** Copies tests/fixtures/<name> into the workspace. */
  fixture(name: string): void
  remove(): void
}

export function workspace(): Workspace {
  const dir = mkdtempSync(join(tmpdir(), 'conch-cli-'))
  writeFileSync(join(dir, 'package.json'), '{ "type": "module", "private": true }\n')
  // A folder of links (as a package manager makes it), not a link to the folder: a link in the
  // workspace on the way to a protected package would refuse every confined terminal.
  const packages = join(CLI_ROOT, 'node_modules')
  const names = readdirSync(packages).filter((name) => !name.startsWith('.'))
  for (const name of names.flatMap((name) => (name.startsWith('@') ? readdirSync(join(packages, name)).map((inner) => join(name, inner)) : [name]))) {
    mkdirSync(dirname(join(dir, 'node_modules', name)), { recursive: true })
    symlinkSync(join(packages, name), join(dir, 'node_modules', name), 'dir')
  }
  return {
    dir,
    write(name, text) {
      const path = join(dir, name)
      writeFileSync(path, text)
      return path
    },
    fixture(name) {
      copyFileSync(join(FIXTURES, name), join(dir, name))
    },
    remove() {
      rmSync(dir, { recursive: true, force: true })
    },
  }
}

/** A script line for the scripted model. */
export function step(text: string, toolCalls: { name: string; arguments: object }[] = []): string {
  return JSON.stringify(toolCalls.length ? { text, tool_calls: toolCalls } : { text })
}

export interface Conch {
  child: ChildProcessWithoutNullStreams
  stdout(): string
  stderr(): string
  /** Resolves when `text` has appeared on stderr. */
  waitForStderr(text: string): Promise<void>
  /** Resolves with the exit code (or 128 + signal number) once the process has exited. */
  exit: Promise<number>
}

/** Writes one JSON-RPC request to conch's stdin and resolves with the response for its id (a frame with that id and no method). */
export function acpRequest(conch: Conch, id: number, method: string, params: object): Promise<Record<string, unknown>> {
  return new Promise((resolvePromise, reject) => {
    const onData = () => {
      const complete = conch.stdout().slice(0, conch.stdout().lastIndexOf('\n') + 1)
      const line = jsonLines(complete).find((frame) => frame['id'] === id && frame['method'] === undefined)
      if (line === undefined) return
      conch.child.stdout.off('data', onData)
      resolvePromise(line)
    }
    conch.child.stdout.on('data', onData)
    void conch.exit.then(() => reject(new Error(`conch exited before answering ${method}; stderr:\n${conch.stderr()}`)))
    conch.child.stdin.write(`${JSON.stringify({ jsonrpc: '2.0', id, method, params })}\n`)
  })
}

/** The variables that choose the live model's key, endpoint and model (see @conch/llm-openai). */
const MODEL_VARIABLES = ['DEEPSEEK_API_KEY', 'OPENAI_API_KEY', 'CONCH_BASE_URL', 'OPENAI_BASE_URL', 'CONCH_MODEL']

/**
 * Starts `node bin/conch.js …args` in `cwd`, without API keys or model endpoints in its
 * environment but those given. `descriptors` maps descriptors conch inherits (above 2) to open
 * descriptors of this process, as a shell's `200<file` would. `launcher` is a command that runs
 * `node bin/conch.js …args` given as its last arguments (`unshare … --`).
 */
export function startConch(args: readonly string[], options: { cwd: string; env?: NodeJS.ProcessEnv; descriptors?: Record<number, number>; launcher?: readonly string[] }): Conch {
  const env: NodeJS.ProcessEnv = { ...process.env, ...options.env }
  for (const name of MODEL_VARIABLES) if (!options.env || !(name in options.env)) delete env[name]
  const inherited = Object.entries(options.descriptors ?? {}).map(([fd, from]) => [Number(fd), from] as const)
  const stdio: Array<'pipe' | 'ignore' | number> = ['pipe', 'pipe', 'pipe']
  for (const [fd, from] of inherited) {
    while (stdio.length <= fd) stdio.push('ignore')
    stdio[fd] = from
  }
  const [file, ...argv] = [...(options.launcher ?? []), process.execPath, BIN, ...args]
  const child = spawn(file!, argv, { cwd: options.cwd, env, stdio }) as ChildProcessWithoutNullStreams
  let out = ''
  let err = ''
  const waiters: { text: string; resolve: () => void }[] = []
  child.stdout.setEncoding('utf8').on('data', (chunk: string) => (out += chunk))
  child.stderr.setEncoding('utf8').on('data', (chunk: string) => {
    err += chunk
    for (const waiter of [...waiters]) {
      if (!err.includes(waiter.text)) continue
      waiters.splice(waiters.indexOf(waiter), 1)
      waiter.resolve()
    }
  })
  const exit = new Promise<number>((resolvePromise) => {
    child.on('close', (code, signal) => resolvePromise(code ?? 128 + (signal ? constants.signals[signal] : 0)))
  })
  return {
    child,
    stdout: () => out,
    stderr: () => err,
    waitForStderr(text) {
      if (err.includes(text)) return Promise.resolve()
      return new Promise((resolvePromise, reject) => {
        waiters.push({ text, resolve: resolvePromise })
        void exit.then(() => reject(new Error(`conch exited before printing ${JSON.stringify(text)}; stderr:\n${err}`)))
      })
    },
    exit,
  }
}

/** Runs conch to completion. */
export async function runConch(
  args: readonly string[],
  options: Parameters<typeof startConch>[1],
): Promise<{ code: number; stdout: string; stderr: string }> {
  const conch = startConch(args, options)
  const code = await conch.exit
  return { code, stdout: conch.stdout(), stderr: conch.stderr() }
}

/** Pids of live processes whose command line contains `token` (Linux and macOS `ps`). */
export function processesWith(token: string): number[] {
  const ps = spawnSync('ps', ['-eo', 'pid=,args='], { encoding: 'utf8' })
  return ps.stdout
    .split('\n')
    .filter((line) => line.includes(token) && !line.includes('ps -eo'))
    .map((line) => Number.parseInt(line.trim(), 10))
}

/** Parses stream-json stdout: one object per non-empty line. */
export function jsonLines(stdout: string): Record<string, unknown>[] {
  return stdout
    .split('\n')
    .filter((line) => line !== '')
    .map((line) => JSON.parse(line) as Record<string, unknown>)
}

/** Every file under `dir`, concatenated. */
export function allFiles(dir: string): string {
  return readdirSync(dir, { recursive: true, withFileTypes: true })
    .filter((entry) => entry.isFile())
    .map((entry) => readFileSync(join(entry.parentPath, entry.name), 'utf8'))
    .join('\n')
}
