/**
 * Runs tasks in the Terminal-Bench 2 layout through conch's terminal tools and reports, per
 * task, the reward, every send's wait reason, the wall time and what was left running.
 *
 *   tsx examples/terminal-bench/run.ts [--base IMAGE] [--json | --verbose] TASK_DIR...
 *
 * For each task: `docker build` of environment/Dockerfile (no network; `BASE_IMAGE` build
 * argument = `--base`), then a real `conch run` whose agent's container `@conch/sandbox-docker`
 * makes from that image, and whose model (the runner's fake model server) opens a terminal there
 * and types the oracle solution/solve.sh, one terminal_send per top-level command (split.ts).
 * When the model is asked for its final answer, tests/ is copied to /tests of the agent's
 * container, tests/test.sh runs there and /logs/verifier/reward.txt is read; then the answer
 * goes and conch ends, removing the container. See README.md.
 */
import { execFile, spawn } from 'node:child_process'
import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { basename, dirname, join, resolve } from 'node:path'
import { fileURLToPath } from 'node:url'
import { LABEL } from '../../packages/sandbox/sandbox-docker/src/provider.ts'
import { spine } from '../../packages/test-support/src/composition.ts'
import { startFakeModel, type FakeModelServer } from '../../packages/test-support/src/fake-model/index.ts'
import { splitCommands } from './split.ts'

const CONCH_BIN = resolve(dirname(fileURLToPath(import.meta.url)), '../../packages/cli/bin/conch.js')

export interface RunOptions {
  /** Image the task Dockerfiles build `FROM` (their `BASE_IMAGE` argument). */
  baseImage: string
  /** Bound of one send; it also is the send's `idleMs`, so only evidence settles a send before it. */
  sendTimeoutMs?: number
  /** `false`: no sends (the terminal is opened and closed), to see the verifier fail on the untouched task. Default true. */
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
  /** Processes in the agent's container after its terminal closed, before the verifier, besides the container's init. */
  leftoverProcesses: number
  /** Containers of the run's conch still present after it ended. */
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

/**
 * The composition of the agent: the spine, the oracle's model (the runner's fake model server,
 * through `@conch/llm-openai`), process ownership, the sandbox seam with `@conch/sandbox-docker`
 * making the agent's container from the task's image, and the terminal trio. The workspace is the
 * runner's empty folder (bind-mounted at the same path); the task's files are the image's own
 * under its WORKDIR (`workingDir`: where the terminal starts), writable as the container's copy
 * (`writableRoot`), where the verifier reads them.
 */
function composition(options: { baseURL: string; image: string; workingDir: string; memoryMb: number | undefined; cpus: number | undefined }) {
  const limits = { ...(options.memoryMb !== undefined && { memoryMb: options.memoryMb }), ...(options.cpus !== undefined && { cpus: options.cpus }) }
  // A key variable that is never set: no key of the runner's environment goes to the oracle's server.
  const endpoint = { apiKeyEnv: 'CONCH_TBENCH_NO_KEY', baseURL: options.baseURL, model: 'oracle' }
  return spine([
    { id: 'model', name: '@conch/llm-openai', config: { endpoints: [endpoint], baseURL: options.baseURL, model: 'oracle', maxRetries: 0 } },
    { id: 'subprocess', name: '@conch/subprocess' },
    { id: 'sandbox', name: '@conch/sandbox' },
    { id: 'sandbox-docker', name: '@conch/sandbox-docker', config: { image: options.image, workingDir: options.workingDir, writableRoot: true, ...limits } },
    { id: 'sandbox-policy', name: '@conch/sandbox-policy', config: { mode: 'workspace-write' } },
    { id: 'pty', name: '@conch/pty' },
    { id: 'pty-local', name: '@conch/pty-local' },
    { id: 'tool-pty', name: '@conch/tool-pty' },
  ])
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

interface ConchExit {
  code: number
  stdout: string
  stderr: string
}

/** Starts `conch run` (SIGTERM after `timeoutMs`); `done` resolves with its exit code and output. */
function startConch(args: string[], cwd: string, timeoutMs: number): { pid: number; done: Promise<ConchExit> } {
  const child = spawn(process.execPath, [CONCH_BIN, ...args], { cwd, stdio: ['ignore', 'pipe', 'pipe'] })
  let stdout = ''
  let stderr = ''
  child.stdout.setEncoding('utf8').on('data', (chunk: string) => (stdout += chunk))
  child.stderr.setEncoding('utf8').on('data', (chunk: string) => (stderr = (stderr + chunk).slice(-20_000)))
  const timer = setTimeout(() => child.kill('SIGTERM'), timeoutMs)
  const done = new Promise<ConchExit>((resolvePromise) => {
    child.on('close', (code, signal) => {
      clearTimeout(timer)
      resolvePromise({ code: code ?? (signal ? 128 : 1), stdout, stderr })
    })
  })
  return { pid: child.pid!, done }
}

/** The sends' reports from `conch run`'s stream-json output, and what went wrong (its exit code, a failed open). */
function readTranscript(conch: ConchExit): { sends: SendReport[]; error?: string } {
  const lines = conch.stdout
    .split('\n')
    .filter((line) => line.startsWith('{'))
    .map((line) => JSON.parse(line) as StreamLine)
  const calls = new Map(lines.filter((line) => line.type === 'tool_call').map((line) => [line.id, line]))
  const sends: SendReport[] = []
  let error = conch.code === 0 ? undefined : `conch run exited ${conch.code}: ${conch.stderr.trim().split('\n').slice(-5).join(' | ')}`
  for (const line of lines) {
    if (line.type !== 'tool_result') continue
    if (line.isError && line.name !== 'terminal_send') error ??= `${line.name} failed: ${line.text}`
    if (line.name !== 'terminal_send') continue
    const meta = line.meta ?? {}
    sends.push({
      text: String(calls.get(line.id)?.arguments?.['text'] ?? '').split('\n')[0]!,
      waitReason: String(meta['waitReason'] ?? (line.isError ? `error: ${line.text}` : 'none')),
      evidence: meta['evidence'],
      elapsedMs: meta['elapsedMs'] as number | undefined,
      output: line.text ?? '',
    })
  }
  return error === undefined ? { sends } : { sends, error }
}

/** Ids of the containers `@conch/sandbox-docker` made for the conch process `pid` (its `conch.owner-pid` label). */
async function containersOf(pid: number): Promise<string[]> {
  return (await docker(['ps', '-aq', '--no-trunc', '--filter', `label=${LABEL.pid}=${pid}`])).split('\n').filter(Boolean)
}

/**
 * How many processes run in container `id` (host pids whose cgroup names it) besides its init and
 * the init's `sleep infinity`. A zombie is not counted: it has ended, and the init has yet to reap it.
 */
async function processesIn(id: string): Promise<number> {
  const init = Number((await docker(['inspect', '--format', '{{.State.Pid}}', id])).trim())
  const read = (pid: string, file: string) => {
    try {
      return readFileSync(`/proc/${pid}/${file}`, 'utf8')
    } catch {
      return '' // gone meanwhile
    }
  }
  return readdirSync('/proc').filter((pid) => {
    if (!/^\d+$/.test(pid) || Number(pid) === init || !read(pid, 'cgroup').includes(id)) return false
    const stat = read(pid, 'stat')
    // proc(5): the state and the ppid are the first fields after the command name's closing `)`.
    const [state, ppid] = stat.slice(stat.lastIndexOf(')') + 2).split(' ')
    if (stat === '' || state === 'Z') return false
    return !(Number(ppid) === init && read(pid, 'cmdline') === 'sleep\0infinity\0')
  }).length
}

/** The verifier in container `id`: tests/ copied to /tests, `bash /tests/test.sh`, then /logs/verifier/reward.txt. */
async function verify(id: string, taskDir: string, timeoutMs: number): Promise<{ reward: number | null; error?: string }> {
  await docker(['exec', id, 'mkdir', '-p', '/logs/verifier', '/logs/agent'])
  await docker(['cp', join(taskDir, 'tests'), `${id}:/tests`])
  const error = await docker(['exec', id, 'bash', '/tests/test.sh'], timeoutMs).then(
    () => undefined,
    (failure: Error) => `verifier: ${failure.message}`,
  )
  const reward = (await docker(['exec', id, 'cat', '/logs/verifier/reward.txt']).catch(() => '')).trim()
  return { reward: reward === '' ? null : Number(reward), ...(error !== undefined && { error }) }
}

/**
 * One task, from build to teardown; never throws for the task's own failures (see `error`).
 * The oracle's model is a fake model server the runner scripts: `terminal_open`, one
 * `terminal_send` per send of solve.sh, `terminal_close`, then the final answer — held back while
 * the verifier runs in the agent's container (the model's turn is still open, so the agent and
 * its container are too); then the answer goes, `conch run` ends and the provider removes the
 * container.
 */
export async function runTask(taskDir: string, options: RunOptions): Promise<TaskReport> {
  const started = performance.now()
  const task = basename(resolve(taskDir))
  const toml = readFileSync(join(taskDir, 'task.toml'), 'utf8')
  const seconds = (section: string, key: string) => (tomlNumber(toml, section, key) ?? 600) * 1000
  const report: TaskReport = { task, reward: null, sends: [], wallMs: 0, leftoverProcesses: 0, leftoverContainers: 0 }
  const work = mkdtempSync(join(tmpdir(), 'conch-tbench-'))
  let model: FakeModelServer | undefined
  let conch: ReturnType<typeof startConch> | undefined
  try {
    const image = `conch-tbench/${task}:latest`
    await docker(['build', '-q', '--network', 'none', '--build-arg', `BASE_IMAGE=${options.baseImage}`, '-t', image, join(taskDir, 'environment')], seconds('environment', 'build_timeout_sec'))
    const workingDir = (await docker(['image', 'inspect', '--format', '{{.Config.WorkingDir}}', image])).trim() || '/'

    const agentMs = seconds('agent', 'timeout_sec')
    const sendTimeoutMs = Math.min(options.sendTimeoutMs ?? 60_000, agentMs)
    const sends = options.solve === false ? [] : splitCommands(readFileSync(join(taskDir, 'solution', 'solve.sh'), 'utf8'))
    const call = (name: string, args: Record<string, unknown>) => ({ toolCalls: [{ name, arguments: args }] })
    model = await startFakeModel()
    model.enqueue(
      call('terminal_open', { type: 'shell', name: task }),
      ...sends.map((send) => call('terminal_send', { sessionId: 'pty-1', text: send.text, timeoutMs: sendTimeoutMs, idleMs: sendTimeoutMs })),
      call('terminal_close', { sessionId: 'pty-1' }),
      { text: 'Done.', stallAfterChunks: 0 },
    )
    // JSON is YAML: the composition needs no YAML writer.
    const config = join(work, 'cordis.yml')
    const limits = { memoryMb: tomlNumber(toml, 'environment', 'memory_mb'), cpus: tomlNumber(toml, 'environment', 'cpus') }
    writeFileSync(config, JSON.stringify(composition({ baseURL: model.openaiBaseUrl, image, workingDir, ...limits }), null, 2))
    const instruction = readFileSync(join(taskDir, 'instruction.md'), 'utf8')
    conch = startConch(['run', '--config', config, '--output', 'stream-json', '--cwd', work, instruction], work, agentMs + seconds('verifier', 'timeout_sec'))

    // The final answer is asked for: every tool call has its result, and the agent's container still stands.
    const final = sends.length + 2
    const held = await Promise.race([
      model.waitFor((requests) => requests.filter((request) => request.api === 'chat')[final]?.stalled).catch(() => false),
      conch.done.then(() => false),
    ])
    if (held) {
      const containers = await containersOf(conch.pid)
      if (containers.length !== 1) throw new Error(`conch run has ${containers.length} containers for its agent, not one`)
      report.leftoverProcesses = await processesIn(containers[0]!)
      const verdict = await verify(containers[0]!, taskDir, seconds('verifier', 'timeout_sec'))
      report.reward = verdict.reward
      if (verdict.error !== undefined) report.error = verdict.error
      model.release()
    }
    const transcript = readTranscript(await conch.done)
    report.sends = transcript.sends
    if (transcript.error !== undefined) report.error ??= transcript.error
    if (!held) report.error ??= 'conch run ended before it asked for the final answer'
  } catch (error) {
    report.error = (error as Error).message
  } finally {
    await model?.close()
    if (conch !== undefined) {
      await conch.done
      const left = await containersOf(conch.pid).catch(() => [])
      report.leftoverContainers = left.length
      if (left.length > 0) await docker(['rm', '-f', ...left]).catch(() => undefined)
    }
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
