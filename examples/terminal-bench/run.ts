/**
 * Runs tasks in the Terminal-Bench 2 layout through conch's terminal tools and reports, per
 * task, the reward, every send's wait reason, the wall time and what was left running.
 *
 *   tsx examples/terminal-bench/run.ts [--base IMAGE] [--json | --verbose] TASK_DIR...
 *
 * For each task: `docker build` of environment/Dockerfile (no network; `BASE_IMAGE` build
 * argument = `--base`), one container from it, then a real `conch run` whose scripted model
 * opens a terminal in that container and types the oracle solution/solve.sh, one
 * terminal_send per top-level command (split.ts). Then tests/ is copied to /tests, tests/test.sh
 * runs, and /logs/verifier/reward.txt is read. See README.md.
 */
import { execFile, spawn } from 'node:child_process'
import { mkdtempSync, readdirSync, readFileSync, readlinkSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { basename, dirname, join, resolve } from 'node:path'
import { fileURLToPath } from 'node:url'
import { splitCommands } from './split.ts'

const CONCH_BIN = resolve(dirname(fileURLToPath(import.meta.url)), '../../packages/cli/bin/conch.js')
/** The label every container of a run carries, with the run's id as its value. */
export const RUN_LABEL = 'conch.terminal-bench.run'

export interface RunOptions {
  /** Image the task Dockerfiles build `FROM` (their `BASE_IMAGE` argument). */
  baseImage: string
  /** Bound of one send; it also is the send's `idleMs`, so only evidence settles a send before it. */
  sendTimeoutMs?: number
  /** `false`: skip the solution (no conch run), to see the verifier fail on the untouched task. Default true. */
  solve?: boolean
}

export interface SendReport {
  /** The send's first line. */
  text: string
  waitReason: string
  /** How readiness was shown (tool-pty's `evidence` meta), when it says. */
  evidence: unknown
  elapsedMs: number | undefined
  /** The result text the model read. */
  output: string
}

export interface TaskReport {
  task: string
  /** The verifier's reward.txt as a number; null when it wrote none. */
  reward: number | null
  sends: SendReport[]
  wallMs: number
  /** Processes still in the task container after conch ended, besides its init. */
  leftoverProcesses: number
  /** Containers of this run still present after the task. */
  leftoverContainers: number
  /** What went wrong outside the verifier's verdict (a failed build, conch exiting non-zero). */
  error?: string
}

/** Runs `docker args…`; resolves with stdout, rejects naming the command and its stderr. */
function docker(args: string[], timeoutMs = 120_000): Promise<string> {
  return new Promise((resolvePromise, reject) => {
    execFile('docker', args, { timeout: timeoutMs, maxBuffer: 16 << 20, encoding: 'utf8' }, (error, stdout, stderr) => {
      if (error) reject(new Error(`docker ${args.slice(0, 2).join(' ')} failed: ${(stderr || error.message).trim()}`))
      else resolvePromise(stdout)
    })
  })
}

/** What the example tasks run besides bash: checked in the base image by `taskBase`. */
export const TASK_PROGRAMS = ['gcc', 'make', 'ed', 'gdb', 'git', 'python3']
/** Debian packages that provide them (libc6-dev: the C headers gcc needs). */
const TASK_PACKAGES = ['gcc', 'libc6-dev', 'make', 'ed', 'gdb', 'git', 'python3']

/**
 * An image to build the example tasks `FROM`: `image` when it has `TASK_PROGRAMS` and the C
 * headers, else `<repository>:<tag>-tasks`, derived from it once (apt-get inside a build, so
 * with the network; the tasks' own builds have none) and reused while it exists.
 */
export async function taskBase(image: string): Promise<string> {
  await docker(['image', 'inspect', image]).catch(() => {
    throw new Error(`the base image ${image} is not on the Docker daemon; build it (scripts/build-test-image.sh makes conch-test:bookworm) or name another with --base`)
  })
  const check = `for p in ${TASK_PROGRAMS.join(' ')}; do command -v $p >/dev/null || echo $p; done; [ -f /usr/include/stdio.h ] || echo libc6-dev`
  const missing = async (candidate: string) => (await docker(['run', '--rm', '--pull', 'never', '--network', 'none', candidate, 'sh', '-c', check])).trim()
  if ((await missing(image)) === '') return image
  const derived = `${image.includes(':') ? image : `${image}:latest`}-tasks`
  if ((await docker(['image', 'inspect', derived]).then(() => missing(derived)).catch(() => 'absent')) === '') return derived
  const dir = mkdtempSync(join(tmpdir(), 'conch-tbench-base-'))
  try {
    writeFileSync(
      join(dir, 'Dockerfile'),
      `FROM ${image}\nRUN apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends ${TASK_PACKAGES.join(' ')} && rm -rf /var/lib/apt/lists/*\n`,
    )
    await docker(['build', '-q', '-t', derived, dir], 600_000)
  } finally {
    rmSync(dir, { recursive: true, force: true })
  }
  return derived
}

/** `[section] key = number` of a task.toml (the only shape this runner reads). */
export function tomlNumber(toml: string, section: string, key: string): number | undefined {
  let current = ''
  for (const raw of toml.split('\n')) {
    const line = raw.replace(/#.*$/, '').trim()
    const header = /^\[([^\]]+)\]$/.exec(line)
    if (header) current = header[1]!.trim()
    const entry = /^([A-Za-z0-9_]+)\s*=\s*([0-9.]+)$/.exec(line)
    if (entry && current === section && entry[1] === key) return Number(entry[2])
  }
  return undefined
}

/** Pids of the processes whose mount namespace is the one of `initPid`'s, `initPid` itself left out. */
function processesInNamespaceOf(initPid: number): number[] {
  const namespace = readlinkSync(`/proc/${initPid}/ns/mnt`)
  return readdirSync('/proc')
    .filter((name) => /^\d+$/.test(name) && Number(name) !== initPid)
    .filter((pid) => {
      try {
        return readlinkSync(`/proc/${pid}/ns/mnt`) === namespace
      } catch {
        return false // gone meanwhile
      }
    })
    .map(Number)
}

/**
 * The composition the terminal runs in: the spine, the scripted model, process ownership and the
 * terminal trio, with pty-local's shell entering the container's mount, UTS, IPC, network and
 * PID namespaces (nsenter(1): gdb needs the container's /proc to show its inferior) in the
 * init's working directory (the image's WORKDIR) and with the image's environment. The terminal stays
 * on conch's own PTY, so both readiness tiers (the prompt marker and the kernel's read on the
 * PTY slave) work unchanged; the container's namespaces are its confinement.
 */
function composition(options: { script: string; pid: number; env: Record<string, string> }): object[] {
  const bash = ['/bin/bash', '--noprofile', '--rcfile', '/dev/null', '+H', '-i']
  const nsenter = ['--target', String(options.pid), '--mount', '--uts', '--ipc', '--net', '--pid', '--wd', '--', ...bash]
  return [
    { id: 'sessions', name: '@conch/session' },
    { id: 'tools', name: '@conch/tools' },
    { id: 'llm', name: '@conch/llm' },
    { id: 'model', name: '@conch/llm-replay', config: { script: options.script } },
    { id: 'subprocess', name: '@conch/subprocess' },
    { id: 'sandbox', name: '@conch/sandbox' },
    { id: 'sandbox-policy', name: '@conch/sandbox-policy', config: { mode: 'danger-full-access' } },
    { id: 'pty', name: '@conch/pty' },
    { id: 'pty-local', name: '@conch/pty-local', config: { shellPath: 'nsenter', shellArgs: nsenter, trustedEnv: options.env } },
    { id: 'tool-pty', name: '@conch/tool-pty' },
    { id: 'agents', name: '@conch/agent' },
  ]
}

interface StreamLine {
  type: string
  id?: string
  name?: string
  isError?: boolean
  text?: string
  arguments?: Record<string, unknown>
  meta?: Record<string, unknown>
  status?: string
}

/** Runs `conch run` to its end (SIGTERM after `timeoutMs`); resolves with its exit code and stdout. */
function runConch(args: string[], cwd: string, timeoutMs: number): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((resolvePromise) => {
    const child = spawn(process.execPath, [CONCH_BIN, ...args], { cwd, stdio: ['ignore', 'pipe', 'pipe'] })
    let stdout = ''
    let stderr = ''
    child.stdout.setEncoding('utf8').on('data', (chunk: string) => (stdout += chunk))
    child.stderr.setEncoding('utf8').on('data', (chunk: string) => (stderr = (stderr + chunk).slice(-20_000)))
    const timer = setTimeout(() => child.kill('SIGTERM'), timeoutMs)
    child.on('close', (code, signal) => {
      clearTimeout(timer)
      resolvePromise({ code: code ?? (signal ? 128 : 1), stdout, stderr })
    })
  })
}

/** The solution's sends through a real `conch run`, in the container whose init is `pid`. */
async function solveThroughConch(options: {
  task: string
  taskDir: string
  work: string
  pid: number
  env: Record<string, string>
  sendTimeoutMs: number
  runTimeoutMs: number
}): Promise<{ sends: SendReport[]; error?: string }> {
  const sends = splitCommands(readFileSync(join(options.taskDir, 'solution', 'solve.sh'), 'utf8'))
  const script = join(options.work, 'script.jsonl')
  const send = (text: string) => ({ name: 'terminal_send', arguments: { sessionId: 'pty-1', text, timeoutMs: options.sendTimeoutMs, idleMs: options.sendTimeoutMs } })
  const steps = [
    { tool_calls: [{ name: 'terminal_open', arguments: { type: 'shell', name: options.task } }] },
    ...sends.map((s) => ({ tool_calls: [send(s.text)] })),
    { tool_calls: [{ name: 'terminal_close', arguments: { sessionId: 'pty-1' } }] },
    { text: 'Done.' },
  ]
  writeFileSync(script, steps.map((step) => JSON.stringify(step)).join('\n'))
  // JSON is YAML: the composition needs no YAML writer.
  const config = join(options.work, 'cordis.yml')
  writeFileSync(config, JSON.stringify(composition({ script, pid: options.pid, env: options.env }), null, 2))
  const instruction = readFileSync(join(options.taskDir, 'instruction.md'), 'utf8')
  const conch = await runConch(['run', '--config', config, '--script', script, '--output', 'stream-json', '--cwd', options.work, instruction], options.work, options.runTimeoutMs)

  const lines = conch.stdout
    .split('\n')
    .filter((line) => line.startsWith('{'))
    .map((line) => JSON.parse(line) as StreamLine)
  const calls = new Map(lines.filter((line) => line.type === 'tool_call').map((line) => [line.id, line]))
  const reports: SendReport[] = []
  let error = conch.code === 0 ? undefined : `conch run exited ${conch.code}: ${conch.stderr.trim().split('\n').slice(-5).join(' | ')}`
  for (const line of lines) {
    if (line.type !== 'tool_result') continue
    if (line.isError && line.name === 'terminal_open') error ??= `terminal_open failed: ${line.text}`
    if (line.name !== 'terminal_send') continue
    const meta = line.meta ?? {}
    reports.push({
      text: String(calls.get(line.id)?.arguments?.['text'] ?? '').split('\n')[0]!,
      waitReason: String(meta['waitReason'] ?? (line.isError ? `error: ${line.text}` : 'none')),
      evidence: meta['evidence'],
      elapsedMs: meta['elapsedMs'] as number | undefined,
      output: line.text ?? '',
    })
  }
  return error === undefined ? { sends: reports } : { sends: reports, error }
}

/** One task, from build to teardown; never throws for the task's own failures (see `error`). */
export async function runTask(taskDir: string, options: RunOptions): Promise<TaskReport> {
  const started = performance.now()
  const task = basename(resolve(taskDir))
  const runId = `${task}-${process.pid}-${Date.now().toString(36)}`
  const toml = readFileSync(join(taskDir, 'task.toml'), 'utf8')
  const seconds = (section: string, key: string) => (tomlNumber(toml, section, key) ?? 600) * 1000
  const report: TaskReport = { task, reward: null, sends: [], wallMs: 0, leftoverProcesses: 0, leftoverContainers: 0 }
  const work = mkdtempSync(join(tmpdir(), 'conch-tbench-'))
  let container: string | undefined
  try {
    const image = `conch-tbench/${task}:latest`
    await docker(['build', '-q', '--network', 'none', '--build-arg', `BASE_IMAGE=${options.baseImage}`, '-t', image, join(taskDir, 'environment')], seconds('environment', 'build_timeout_sec'))
    // The container's init is `sleep`, started in the image's WORKDIR: the terminal starts there too (nsenter --wd).
    container = (await docker(['run', '-d', '--pull', 'never', '--network', 'none', '--label', `${RUN_LABEL}=${runId}`, '--name', `conch-tbench-${runId}`, image, 'sleep', 'infinity'])).trim()
    const pid = Number((await docker(['inspect', '--format', '{{.State.Pid}}', container])).trim())
    await docker(['exec', container, 'mkdir', '-p', '/logs/verifier', '/logs/agent'])

    if (options.solve !== false) {
      const imageEnv = JSON.parse(await docker(['image', 'inspect', '--format', '{{json .Config.Env}}', image])) as string[] | null
      const env = Object.fromEntries((imageEnv ?? []).map((entry) => [entry.slice(0, entry.indexOf('=')), entry.slice(entry.indexOf('=') + 1)]))
      const agentMs = seconds('agent', 'timeout_sec')
      const solved = await solveThroughConch({ task, taskDir, work, pid, env, sendTimeoutMs: Math.min(options.sendTimeoutMs ?? 60_000, agentMs), runTimeoutMs: agentMs })
      report.sends = solved.sends
      if (solved.error !== undefined) report.error = solved.error
      report.leftoverProcesses = processesInNamespaceOf(pid).length
    }

    await docker(['cp', join(taskDir, 'tests'), `${container}:/tests`])
    await docker(['exec', container, 'bash', '/tests/test.sh'], seconds('verifier', 'timeout_sec')).catch((error: Error) => {
      report.error ??= `verifier: ${error.message}`
    })
    const reward = await docker(['exec', container, 'cat', '/logs/verifier/reward.txt']).catch(() => undefined)
    report.reward = reward === undefined || reward.trim() === '' ? null : Number(reward.trim())
  } catch (error) {
    report.error = (error as Error).message
  } finally {
    if (container !== undefined) await docker(['rm', '-f', container]).catch(() => undefined)
    report.leftoverContainers = (await docker(['ps', '-aq', '--filter', `label=${RUN_LABEL}=${runId}`]).catch(() => '')).split('\n').filter(Boolean).length
    rmSync(work, { recursive: true, force: true })
    report.wallMs = Math.round(performance.now() - started)
  }
  return report
}

/** The readiness tier of tool-pty's `evidence` meta: `prompt` (the controlled prompt) or `proc` (the kernel). */
const evidenceTier = (evidence: unknown): string => String((evidence as { tier?: unknown } | undefined)?.tier ?? 'none')

/** The report as the README shows it: one block per task. */
export function formatReport(reports: readonly TaskReport[], verbose = false): string {
  return reports
    .map((r) =>
      [
        `${r.task}: reward ${r.reward ?? 'none'}, ${r.sends.length} sends, ${(r.wallMs / 1000).toFixed(1)} s, leftover containers ${r.leftoverContainers}, processes ${r.leftoverProcesses}${r.error ? `\n  error: ${r.error}` : ''}`,
        ...r.sends.map((s) => `  ${`${s.waitReason} (${evidenceTier(s.evidence)})`.padEnd(24)} ${s.text}${verbose ? `\n${s.output.replace(/^/gm, '      | ')}` : ''}`),
      ].join('\n'),
    )
    .join('\n')
}

async function main(argv: string[]): Promise<number> {
  let baseImage = 'conch-test:bookworm'
  let json = false
  let verbose = false
  const tasks: string[] = []
  for (let i = 0; i < argv.length; i++) {
    if (argv[i] === '--base') baseImage = argv[++i] ?? baseImage
    else if (argv[i] === '--json') json = true
    else if (argv[i] === '--verbose') verbose = true
    else tasks.push(argv[i]!)
  }
  if (tasks.length === 0) {
    process.stderr.write('usage: tsx examples/terminal-bench/run.ts [--base IMAGE] [--json | --verbose] TASK_DIR...\n')
    return 2
  }
  const reports: TaskReport[] = []
  baseImage = await taskBase(baseImage)
  for (const task of tasks) reports.push(await runTask(task, { baseImage }))
  process.stdout.write(json ? `${JSON.stringify(reports, null, 2)}\n` : `${formatReport(reports, verbose)}\n`)
  return reports.every((r) => r.reward === 1 && !r.error) ? 0 : 1
}

if (process.argv[1] !== undefined && resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  process.exitCode = await main(process.argv.slice(2)).catch((error: Error) => {
    process.stderr.write(`terminal-bench: ${error.message}\n`)
    return 2
  })
}
