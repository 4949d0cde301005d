/**
 * What a hostile terminal command or `run_code` program reaches on the host, tried in a real
 * `conch run` with the scripted model: a host daemon's socket (a real dockerd, as root),
 * descriptors conch itself
 * inherited (`conch run 200<key 201>>outside`), and, unconfined, processes left behind when conch
 * is killed with SIGKILL mid-run.
 */
import { spawnSync } from 'node:child_process'
import { closeSync, openSync, readFileSync, writeFileSync } from 'node:fs'
import { request } from 'node:http'
import { join, resolve } from 'node:path'
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest'
import { terminalComposition, writeComposition } from '@conch/test-support/composition'
import { tempFolders } from '@conch/test-support/homes'
import { CLI_ROOT, jsonLines, processesWith, runConch, startConch, step, workspace, type Workspace } from './harness.ts'

vi.setConfig({ testTimeout: 90_000 })

const hasBwrap = process.platform === 'linux' && spawnSync('bwrap', ['--ro-bind', '/', '/', 'true']).status === 0
const startDockerd = resolve(CLI_ROOT, '..', '..', 'scripts', 'start-dockerd.sh')
const hasDockerd = hasBwrap && process.getuid?.() === 0 && spawnSync(startDockerd, { stdio: 'inherit' }).status === 0

/** The scripted model, the sandbox under `mode`, terminals and run_code. */
const composition = (script: string, mode: 'read-only' | 'workspace-write' | 'danger-full-access') => terminalComposition({ script, mode, runCode: true })

const outsideFolder = tempFolders('conch-outside-', '/var/tmp')
let ws: Workspace
let outside: string
beforeEach(() => {
  ws = workspace()
  outside = outsideFolder()
})
afterEach(() => {
  ws.remove()
})

/** Runs one run_code turn of `code` under `mode`; returns the tool result's text. */
async function runCode(code: string, mode: 'read-only' | 'workspace-write' | 'danger-full-access', descriptors?: Record<number, number>): Promise<string> {
  const script = ws.write('script.jsonl', [step('Running.', [{ name: 'run_code', arguments: { code } }]), step('Done.')].join('\n'))
  const config = writeComposition(ws.dir, composition(script, mode))
  const run = await runConch(['run', '--config', config, '--output', 'stream-json', 'go'], { cwd: ws.dir, ...(descriptors && { descriptors }) })
  expect(run.code, run.stderr).toBe(0)
  const result = jsonLines(run.stdout).find((line) => line['type'] === 'tool_result') as { isError: boolean; text: string }
  expect(result.isError, result.text).toBe(false)
  return result.text
}

/** GET /_ping on dockerd's socket from the host: the body (`OK`). */
function hostPing(): Promise<string> {
  return new Promise<string>((resolvePing, reject) => {
    request({ socketPath: '/var/run/docker.sock', path: '/_ping', agent: false }, (res) => {
      let body = ''
      res.setEncoding('utf8').on('data', (chunk: string) => (body += chunk)).on('end', () => resolvePing(body))
    }).on('error', reject).end()
  })
}

describe.runIf(hasDockerd)('a host daemon’s socket', () => {
  it.each(['read-only', 'workspace-write'] as const)('a terminal cannot create a container through dockerd’s socket under %s, which the host reaches', async (mode) => {
    expect(await hostPing()).toBe('OK')
    const create = JSON.stringify({ Image: 'conch-absent-image', Cmd: ['id'], HostConfig: { Binds: [`${outside}:/host`] } })
    const text = `curl -sS --unix-socket /var/run/docker.sock -X POST -H 'Content-Type: application/json' -d '${create}' http://localhost/containers/create; echo " create=$?"`
    const script = ws.write('script.jsonl', [
      step('', [{ name: 'terminal_open', arguments: { type: 'shell' } }]),
      step('', [{ name: 'terminal_send', arguments: { sessionId: 'pty-1', text } }]),
      step('Done.'),
    ].join('\n'))
    const run = await runConch(['run', '--config', writeComposition(ws.dir, composition(script, mode)), '--output', 'stream-json', 'go'], { cwd: ws.dir })
    expect(run.code, run.stderr).toBe(0)
    const sent = jsonLines(run.stdout).filter((line) => line['type'] === 'tool_result')[1] as { text: string }
    expect(sent.text).toMatch(/^ create=7$/m)
    expect(sent.text).not.toMatch(/No such image|"Id"/)
  })

  it.each(['read-only', 'workspace-write'] as const)('run_code cannot connect to dockerd’s socket under %s, which the host reaches', async (mode) => {
    expect(await hostPing()).toBe('OK')
    const text = await runCode(
      [
        'const net = require("node:net")',
        'const tries = ["/var/run/docker.sock", "/run/docker.sock"].map((path) => new Promise((done) => {',
        '  const socket = net.connect(path, () => socket.end("GET /_ping HTTP/1.0\\r\\n\\r\\n"))',
        '  let reply = ""',
        '  socket.on("data", (chunk) => (reply += chunk)).on("end", () => done("reached " + reply)).on("error", (e) => done(e.code))',
        '}))',
        'return await Promise.all(tries)',
      ].join('\n'),
      mode,
    )
    expect(JSON.parse(text.slice(0, text.lastIndexOf('\n[run_code')))).toEqual(['ENOENT', 'ENOENT'])
  })
})

describe.runIf(hasBwrap)('descriptors conch inherited', () => {
  it.each(['read-only', 'workspace-write'] as const)('a run_code program under %s can neither read nor write them', async (mode) => {
    const key = join(outside, 'id_ed25519')
    writeFileSync(key, 'PRIVATE-KEY-MATERIAL\n')
    const log = join(outside, 'outside.txt')
    writeFileSync(log, '')
    const [keyFd, logFd] = [openSync(key, 'r'), openSync(log, 'a')]
    try {
      const text = await runCode(
        [
          'const fs = require("node:fs")',
          'const out: Record<string, string> = {}',
          'try { out.read = fs.readFileSync("/proc/self/fd/200", "utf8") } catch (e) { out.read = (e as NodeJS.ErrnoException).code! }',
          'try { fs.writeSync(201, "PLANTED\\n"); out.write = "written" } catch (e) { out.write = (e as NodeJS.ErrnoException).code! }',
          'try { fs.appendFileSync("/proc/self/fd/201", "PLANTED\\n"); out.append = "written" } catch (e) { out.append = (e as NodeJS.ErrnoException).code! }',
          'out.open = fs.readdirSync("/proc/self/fd").filter((fd) => Number(fd) > 3).join(",")',
          'return out',
        ].join('\n'),
        mode,
        { 200: keyFd, 201: logFd },
      )
      expect(text).not.toContain('PRIVATE-KEY')
      expect(JSON.parse(text.slice(0, text.lastIndexOf('\n[run_code')))).toMatchObject({ read: 'ENOENT', write: 'EBADF', append: 'ENOENT' })
      expect(readFileSync(log, 'utf8')).toBe('')
    } finally {
      closeSync(keyFd)
      closeSync(logFd)
    }
  })
})

describe.runIf(process.platform === 'linux')('an unconfined run_code program when conch is killed', () => {
  it('its children, a setsid’d one too, are gone after conch dies by SIGKILL mid-run (danger-full-access)', async () => {
    // Unique sleep lengths name the two children in the process list.
    const [plain, detached] = [`${9000 + (process.pid % 900)}.1${Date.now() % 1000}`, `${9000 + (process.pid % 900)}.2${Date.now() % 1000}`]
    const code = [
      'const { spawn } = require("node:child_process")',
      `spawn("sleep", ["${plain}"], { stdio: "ignore" })`,
      `spawn("sleep", ["${detached}"], { stdio: "ignore", detached: true })`,
      'await new Promise(() => {})',
    ].join('\n')
    const script = ws.write('script.jsonl', [step('Running.', [{ name: 'run_code', arguments: { code } }]), step('Done.')].join('\n'))
    const config = writeComposition(ws.dir, composition(script, 'danger-full-access'))
    const conch = startConch(['run', '--config', config, '--output', 'stream-json', 'go'], { cwd: ws.dir })
    const sleeps = () => [...processesWith(`sleep ${plain}`), ...processesWith(`sleep ${detached}`)]
    try {
      await vi.waitFor(() => expect(sleeps()).toHaveLength(2), { timeout: 30_000, interval: 50 })
      conch.child.kill('SIGKILL')
      await conch.exit
      await vi.waitFor(() => expect(sleeps()).toEqual([]), { timeout: 10_000, interval: 50 })
    } finally {
      for (const pid of sleeps()) process.kill(pid, 'SIGKILL')
    }
  })
})
