/**
 * Running the real `conch` bin as a child process, and checking that nothing it started is
 * left behind.
 */
import { spawn, type ChildProcessWithoutNullStreams } from 'node:child_process'
import { readdirSync, readlinkSync, realpathSync } from 'node:fs'
import { constants } from 'node:os'
import { dirname, join, resolve, sep } from 'node:path'
import { fileURLToPath } from 'node:url'

const here = dirname(fileURLToPath(import.meta.url))
/** The repository root (the harness lives in packages/test-support/src/snapshot). */
export const REPO_ROOT = resolve(here, '..', '..', '..', '..')
/** The `conch` bin. */
export const CONCH_BIN = join(REPO_ROOT, 'packages', 'cli', 'bin', 'conch.js')

export interface ConchProcess {
  child: ChildProcessWithoutNullStreams
  /** Everything written to stderr so far. */
  stderr(): string
  /** The exit code, or 128 + the signal number, once the process has exited. */
  exit: Promise<number>
}

/**
 * Starts `node packages/cli/bin/conch.js …args` in the repository root, without API keys in
 * its environment (a snapshot run never reaches a live model).
 */
export function startConch(args: readonly string[]): ConchProcess {
  const env: NodeJS.ProcessEnv = { ...process.env }
  delete env['DEEPSEEK_API_KEY']
  delete env['OPENAI_API_KEY']
  delete env['CONCH_UPDATE_SNAPSHOTS']
  const child = spawn(process.execPath, [CONCH_BIN, ...args], { cwd: REPO_ROOT, env })
  let stderr = ''
  child.stderr.setEncoding('utf8').on('data', (chunk: string) => (stderr += chunk))
  const exit = new Promise<number>((resolvePromise) => {
    child.on('close', (code, signal) => resolvePromise(code ?? 128 + (signal ? constants.signals[signal] : 0)))
  })
  return { child, stderr: () => stderr, exit }
}

/**
 * Pids of live processes whose working directory is `dir` or inside it (Linux `/proc/<pid>/cwd`).
 * Every terminal of a scenario starts in its workspace, so after `conch` has exited this must
 * be empty. Elsewhere it returns [] (the check needs /proc).
 */
export function processesIn(dir: string): number[] {
  if (process.platform !== 'linux') return []
  const root = realpathSync(dir)
  const found: number[] = []
  for (const name of readdirSync('/proc')) {
    if (!/^\d+$/.test(name)) continue
    let cwd: string
    try {
      cwd = readlinkSync(`/proc/${name}/cwd`)
    } catch {
      continue
    }
    if (cwd === root || cwd.startsWith(root + sep)) found.push(Number(name))
  }
  return found
}

/** Whether a process with this pid exists (signal 0, kill(2)). */
export function alive(pid: number): boolean {
  try {
    process.kill(pid, 0)
    return true
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === 'EPERM'
  }
}
