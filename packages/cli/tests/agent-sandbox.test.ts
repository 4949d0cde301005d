/**
 * One sandbox per agent in real `conch run`s (bubblewrap, as root): a server started in one
 * terminal is reached from another terminal and from run_code, a file in /tmp is seen by all of
 * them, closing a terminal ends its own tree only, and the run's end leaves nothing; a second,
 * concurrent run reaches neither the server nor the file.
 */
import { spawnSync } from 'node:child_process'
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { setTimeout as delay } from 'node:timers/promises'
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest'
import { currentOwner, ownerTag } from '@conch/sandbox'
import { terminalComposition, writeComposition } from '@conch/test-support/composition'
import { jsonLines, processesWith, runConch, startConch, step, workspace, type Workspace } from './harness.ts'

vi.setConfig({ testTimeout: 120_000 })

const asRoot = process.platform === 'linux' && process.getuid?.() === 0 && spawnSync('bwrap', ['--ro-bind', '/', '/', 'true']).status === 0

let ws: Workspace
/** The sandbox's runtime folder of this test's runs: the agents' folders are made in it. */
let runtimeDir: string
beforeEach(() => {
  ws = workspace()
  runtimeDir = mkdtempSync(join(tmpdir(), 'conch-agent-runtime-'))
})
afterEach(() => {
  ws.remove()
  // conch keeps the pins folder a mount of its own (one per run that found none: two concurrent
  // runs may each make one): unmounted here, before the folder goes.
  while (mountPoints().includes(pinsFolder()) && spawnSync('umount', [pinsFolder()]).status === 0);
  rmSync(runtimeDir, { recursive: true, force: true })
})

/** The mount points of this process's mount namespace. */
const mountPoints = (): string[] => readFileSync('/proc/self/mountinfo', 'utf8').split('\n').map((line) => line.split(' ')[4] ?? '')
/** The folder of the agents' pins (network namespaces) of this test's runs. */
const pinsFolder = (): string => join(runtimeDir, `conch-agents-${process.getuid?.() ?? 0}`, 'pins')
/** The agents' folders in `agentsFolder`, its pins folder left out. */
const agentFolders = (agentsFolder: string): string[] => readdirSync(agentsFolder).filter((name) => name !== 'pins')
/** The pin of the one agent a run made, in the pins folder. */
const onlyPin = (): string => {
  const pins = readdirSync(pinsFolder())
  expect(pins).toHaveLength(1)
  return join(pinsFolder(), pins[0]!)
}

/** A `conch run` of `calls` (one model step each) under workspace-write; returns the tool results' texts. */
async function run(calls: Array<{ name: string; arguments: object }>, name = 'script', sandboxPolicy: Record<string, unknown> = {}): Promise<string[]> {
  const script = ws.write(`${name}.jsonl`, [...calls.map((call) => step('', [call])), step('Done.')].join('\n'))
  const config = writeComposition(ws.dir, terminalComposition({ script, mode: 'workspace-write', runCode: true, sandboxLocal: { runtimeDir }, sandboxPolicy }), `${name}.yml`)
  const result = await runConch(['run', '--config', config, '--output', 'stream-json', 'go'], { cwd: ws.dir })
  expect(result.code, result.stderr).toBe(0)
  return jsonLines(result.stdout).filter((line) => line['type'] === 'tool_result').map((line) => String(line['text']))
}

const open = { name: 'terminal_open', arguments: { type: 'shell' } }
const send = (sessionId: string, text: string) => ({ name: 'terminal_send', arguments: { sessionId, text, timeoutMs: 60_000 } })
const runCode = (code: string) => ({ name: 'run_code', arguments: { code } })
/** Waits in the sandbox until `port` answers, then prints `token`. */
const awaitPort = (port: number, token: string) => `until curl -s -o /dev/null http://127.0.0.1:${port}/; do sleep 0.1; done; echo ${token}`
const serve = (port: number) => `python3 -m http.server ${port} --bind 127.0.0.1 >/dev/null 2>&1 &`
/** run_code: the status (or error code) of GET on each port, and /tmp/note (or the error code). */
const probe = (ports: number[]) =>
  [
    'const fs = require("node:fs")',
    'const out: string[] = []',
    `for (const port of ${JSON.stringify(ports)}) {`,
    '  try { out.push(`${port}:${(await fetch(`http://127.0.0.1:${port}/`)).status}`) } catch (e) { out.push(`${port}:${(e as { cause?: { code?: string } }).cause?.code}`) }',
    '}',
    'try { out.push(`note:${fs.readFileSync("/tmp/note", "utf8").trim()}`) } catch (e) { out.push(`note:${(e as NodeJS.ErrnoException).code}`) }',
    'return out.join(" ")',
  ].join('\n')

describe.runIf(asRoot)('one sandbox per agent, in conch run', () => {
  it("a server in pty-1 is reached from pty-2 and run_code, /tmp is shared, closing pty-1 leaves pty-2's server, and the end leaves nothing", async () => {
    const daemon = 70_000 + Math.floor(Math.random() * 9_999)
    const survivor = 60_000 + Math.floor(Math.random() * 9_999)
    const results = await run([
      open,
      send('pty-1', `${serve(8767)} echo shared-note > /tmp/note; setsid nohup sleep ${daemon} >/dev/null 2>&1 & ${awaitPort(8767, 'FIRST-UP')}`),
      open,
      send('pty-2', `curl -s -o /dev/null -w 'from-pty-2=%{http_code}\\n' http://127.0.0.1:8767/; cat /tmp/note; setsid nohup sleep ${survivor} >/dev/null 2>&1 & ${serve(8770)} ${awaitPort(8770, 'SECOND-UP')}`),
      runCode(probe([8767, 8770])),
      { name: 'terminal_close', arguments: { sessionId: 'pty-1' } },
      runCode(probe([8767, 8770])),
    ])
    expect(results[1]).toMatch(/^FIRST-UP$/m)
    expect(results[3]).toMatch(/^from-pty-2=200$/m)
    expect(results[3]).toMatch(/^shared-note$/m)
    expect(results[3]).toMatch(/^SECOND-UP$/m)
    expect(results[4]).toContain('8767:200 8770:200 note:shared-note')
    expect(results[6]).toContain('8767:ECONNREFUSED 8770:200 note:shared-note')
    // The run's end: no daemon (pty-1's went with it; pty-2's with the agent), no holder, no /tmp folder.
    expect(processesWith(`sleep ${daemon}`)).toEqual([])
    expect(processesWith(`sleep ${survivor}`)).toEqual([])
    expect(processesWith(runtimeDir)).toEqual([])
    const agentsFolder = join(runtimeDir, `conch-agents-${process.getuid?.() ?? 0}`)
    expect(existsSync(agentsFolder)).toBe(true)
    expect(agentFolders(agentsFolder)).toEqual([])
    // The pin's file stays for a later agent (removing it would unmount its copies); no pin is mounted.
    expect(mountPoints().filter((point) => point.startsWith(`${pinsFolder()}/`))).toEqual([])
  })

  it('a second, concurrent run reaches neither the server nor the /tmp of the first', async () => {
    const up = join(ws.dir, 'first-up')
    const done = join(ws.dir, 'second-done')
    const first = run(
      [open, send('pty-1', `${serve(8771)} echo first-note > /tmp/note; ${awaitPort(8771, 'FIRST-UP')}; touch ${up}; until [ -e ${done} ]; do sleep 0.1; done; echo FIRST-DONE`)],
      'first',
    )
    const second = run(
      [
        open,
        send('pty-1', `until [ -e ${up} ]; do sleep 0.1; done; curl -s -o /dev/null -w 'code=%{http_code}\\n' http://127.0.0.1:8771/; echo "curl=$?"; cat /tmp/note`),
        runCode(probe([8771])),
        send('pty-1', `touch ${done}`),
      ],
      'second',
    )
    const [firstResults, secondResults] = await Promise.all([first, second])
    expect(firstResults[1]).toMatch(/^FIRST-DONE$/m)
    expect(secondResults[1]).toMatch(/^curl=7$/m)
    expect(secondResults[1]).toMatch(/\/tmp\/note: No such file or directory/)
    expect(secondResults[2]).toContain('8771:ECONNREFUSED note:ENOENT')
  })

  it("under network allow, a refused host is named in the send result, for curl and for node's fetch", async () => {
    const node = `node -e "fetch('http://blocked.example/').then((r) => console.log('reached', r.status), (e) => console.log('fetch:', e.cause?.message))"`
    const results = await run([open, send('pty-1', 'curl -s -w " code=%{http_code}\\n" http://blocked.example/'), send('pty-1', node)], 'allow', { network: 'allow', allow: ['allowed.example'] })
    expect(results[1]).toMatch(/^blocked blocked\.example — not in the allowlist code=403$/m)
    expect(results[1]).toMatch(/^\[network: blocked blocked\.example — not in the allowlist\]$/m)
    // Node 20's fetch goes through the proxy too (the sandbox's Node preload), which refuses the host.
    expect(results[2]).toMatch(/^fetch: Request was cancelled\.$/m)
    expect(results[2]).toMatch(/^\[network: blocked blocked\.example — not in the allowlist\]$/m)
  })

  it('a port opened with expose is reached from the host loopback port the open reports', async () => {
    const done = join(ws.dir, 'host-done')
    const script = ws.write('expose.jsonl', [
      step('', [{ name: 'terminal_open', arguments: { type: 'shell', expose: [8790] } }]),
      // The send stays open (no silence settles it) until the host has fetched the page and
      // made `done`: the run, and with it the agent's sandbox, outlives the fetch.
      step('', [{ name: 'terminal_send', arguments: { sessionId: 'pty-1', text: `cd /tmp && echo exposed-page > page.html && ${serve(8790)} ${awaitPort(8790, 'SERVING')}; until [ -e ${done} ]; do sleep 0.1; done`, timeoutMs: 60_000, idleMs: 60_000 } }]),
      step('Done.'),
    ].join('\n'))
    const config = writeComposition(ws.dir, terminalComposition({ script, mode: 'workspace-write', sandboxLocal: { runtimeDir } }), 'expose.yml')
    const conch = startConch(['run', '--config', config, '--output', 'stream-json', 'go'], { cwd: ws.dir })
    const opened = await new Promise<string>((resolve) => {
      conch.child.stdout.on('data', () => {
        const result = jsonLines(conch.stdout()).find((line) => line['type'] === 'tool_result')
        if (result !== undefined) resolve(String(result['text']))
      })
    })
    const hostPort = Number(opened.match(/^\[exposed: sandbox 127\.0\.0\.1:8790 → host 127\.0\.0\.1:(\d+)\]$/m)?.[1])
    expect(hostPort).toBeGreaterThan(0)
    let page = ''
    while (page === '') {
      // Each attempt is bounded: in whole-file runs one attempt made while the server was starting
      // got no answer and no close (seen with node's fetch, never with curl in 3,000 tries).
      page = await fetch(`http://127.0.0.1:${hostPort}/page.html`, { signal: AbortSignal.timeout(5_000) }).then((response) => (response.ok ? response.text() : ''), () => '')
    }
    expect(page).toBe('exposed-page\n')
    writeFileSync(done, '')
    expect(await conch.exit, conch.stderr()).toBe(0)
    await expect(fetch(`http://127.0.0.1:${hostPort}/page.html`)).rejects.toThrow()
  })

  it("an agent's folder left by a killed run (its .git too) is unpinned and removed by the next run, without following its links, and a running maker's is kept", async () => {
    const agentsFolder = join(runtimeDir, `conch-agents-${process.getuid?.() ?? 0}`)
    const host = mkdtempSync(join(tmpdir(), 'conch-agent-host-'))
    writeFileSync(join(host, 'keep'), 'host file\n')
    try {
      // The workspace has no .git: the agent's own is held there.
      const plant = `echo copy-of-project > /tmp/x; ln -s ${host} /tmp/to-host; mkdir /tmp/d; ln -s ${host}/keep /tmp/d/keep; mkdir -p .git/hooks; echo planted > .git/hooks/pre-commit; touch /tmp/ready; sleep 600`
      const script = ws.write('killed.jsonl', [step('', [open]), step('', [{ name: 'terminal_send', arguments: { sessionId: 'pty-1', text: plant, timeoutMs: 60_000, idleMs: 60_000 } }]), step('Done.')].join('\n'))
      const config = writeComposition(ws.dir, terminalComposition({ script, mode: 'workspace-write', sandboxLocal: { runtimeDir } }), 'killed.yml')
      const conch = startConch(['run', '--config', config, '--output', 'stream-json', 'go'], { cwd: ws.dir })
      const left = async (): Promise<string> => {
        for (;;) {
          const folder = existsSync(agentsFolder) ? agentFolders(agentsFolder)[0] : undefined
          if (folder !== undefined && existsSync(join(agentsFolder, folder, 'tmp', 'ready'))) return join(agentsFolder, folder)
          if (conch.child.exitCode !== null) throw new Error(`conch exited before the terminal wrote /tmp: ${conch.stderr()}`)
          await delay(50)
        }
      }
      const killed = await left()
      conch.child.kill('SIGKILL')
      await conch.exit
      expect(readFileSync(join(killed, 'tmp', 'x'), 'utf8')).toBe('copy-of-project\n')
      const [held] = readdirSync(join(killed, 'held'))
      expect(readFileSync(join(killed, 'held', held!, 'hooks', 'pre-commit'), 'utf8')).toBe('planted\n')
      expect(readdirSync(join(ws.dir, '.git'))).toEqual([]) // the host's: the placeholder
      // Its network namespace stays pinned on the host until a conch sweeps the folder.
      const pin = onlyPin()
      const pinned = () => mountPoints().includes(pin)
      expect(pinned()).toBe(true)
      // A folder whose maker runs (this test's process) is another conch's, in use.
      const live = join(agentsFolder, `agent-${ownerTag(currentOwner()!)}-0123456789abcdef`)
      mkdirSync(join(live, 'tmp'), { recursive: true, mode: 0o700 })
      const results = await run([open, send('pty-1', 'echo NEXT-RUN; ls -A .git; echo listed')], 'next')
      expect(results[1]).toMatch(/^NEXT-RUN\nlisted$/m)
      expect(agentFolders(agentsFolder)).toEqual([live.slice(agentsFolder.length + 1)])
      expect(existsSync(join(ws.dir, '.git'))).toBe(false)
      expect(pinned()).toBe(false)
      expect(readdirSync(host)).toEqual(['keep'])
      expect(readFileSync(join(host, 'keep'), 'utf8')).toBe('host file\n')
    } finally {
      rmSync(host, { recursive: true, force: true })
    }
  })

  it("conch gc unpins and removes the agent's folder of a run killed with SIGKILL, and keeps a running maker's", async () => {
    const agentsFolder = join(runtimeDir, `conch-agents-${process.getuid?.() ?? 0}`)
    const plant = 'touch /tmp/ready; sleep 600'
    const script = ws.write('killed.jsonl', [step('', [open]), step('', [{ name: 'terminal_send', arguments: { sessionId: 'pty-1', text: plant, timeoutMs: 60_000, idleMs: 60_000 } }]), step('Done.')].join('\n'))
    const config = writeComposition(ws.dir, terminalComposition({ script, mode: 'workspace-write', sandboxLocal: { runtimeDir } }), 'killed.yml')
    const conch = startConch(['run', '--config', config, '--output', 'stream-json', 'go'], { cwd: ws.dir })
    let killed: string | undefined
    while (killed === undefined) {
      const folder = existsSync(agentsFolder) ? agentFolders(agentsFolder)[0] : undefined
      if (folder !== undefined && existsSync(join(agentsFolder, folder, 'tmp', 'ready'))) killed = join(agentsFolder, folder)
      else if (conch.child.exitCode !== null) throw new Error(`conch exited before the terminal wrote /tmp: ${conch.stderr()}`)
      else await delay(50)
    }
    conch.child.kill('SIGKILL')
    await conch.exit
    const pin = onlyPin()
    const pinned = () => mountPoints().includes(pin)
    expect(pinned()).toBe(true)
    // A folder whose maker runs (this test's process) is another conch's, in use.
    const live = join(agentsFolder, `agent-${ownerTag(currentOwner()!)}-0123456789abcdef`)
    mkdirSync(join(live, 'tmp'), { recursive: true, mode: 0o700 })
    const gc = await runConch(['gc', '--config', config], { cwd: ws.dir })
    expect(gc.code, gc.stderr).toBe(0)
    expect(gc.stdout).toBe(`removed folder ${killed} (bubblewrap)\nswept: bubblewrap\n`)
    expect(agentFolders(agentsFolder)).toEqual([live.slice(agentsFolder.length + 1)])
    expect(pinned()).toBe(false)
    // Nothing left: the output still names the providers that swept, so a user whose Docker
    // containers remain knows this composition has no Docker provider.
    const again = await runConch(['gc', '--config', config, '--output', 'json'], { cwd: ws.dir })
    expect(JSON.parse(again.stdout)).toEqual({ swept: ['bubblewrap'], removed: [] })
    expect((await runConch(['gc', '--config', config], { cwd: ws.dir })).stdout).toBe('nothing to remove (swept: bubblewrap)\n')
  })
})
