/**
 * `conch run` with the Docker provider (against the real daemon, as root): a conch killed with
 * SIGKILL mid-send leaves its agent's labelled container, and the next run removes it; the example
 * composition runs terminals, run_code and a sub-agent in containers.
 */
import { existsSync, mkdirSync, mkdtempSync, readdirSync, rmSync } from 'node:fs'
import { connect, createServer, type AddressInfo } from 'node:net'
import { tmpdir } from 'node:os'
import { basename, join } from 'node:path'
import { setTimeout as delay } from 'node:timers/promises'
import { fileURLToPath } from 'node:url'
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest'
import { terminalComposition, writeComposition, type CompositionRow } from '@conch/test-support/composition'
import { naming } from '@conch/test-support/procs'
import { docker, dockerSkip, TEST_IMAGE } from '@conch/test-support/docker'
import { jsonLines, runConch, startConch, step, workspace, type Workspace } from './harness.ts'

vi.setConfig({ testTimeout: 120_000 })

let ws: Workspace
beforeEach(() => {
  ws = workspace()
})
afterEach(() => ws.remove())

/** The terminal composition with the Docker provider in place of bubblewrap. */
function dockerComposition(script: string): CompositionRow[] {
  return terminalComposition({ script, mode: 'workspace-write' }).map((row) =>
    row.id === 'sandbox-local' ? { id: 'sandbox-docker', name: '@conch/sandbox-docker', config: { image: TEST_IMAGE } } : row,
  )
}

const open = { name: 'terminal_open', arguments: { type: 'shell' } }
const send = (text: string, idleMs = 60_000) => ({ name: 'terminal_send', arguments: { sessionId: 'pty-1', text, timeoutMs: 60_000, idleMs } })

/** The daemon's socket on a TCP port of 127.0.0.1, as a remote daemon is reached (`DOCKER_HOST=tcp://…`). */
async function tcpDaemon(): Promise<{ host: string; close(): Promise<void> }> {
  const server = createServer((client) => {
    const daemon = connect('/var/run/docker.sock')
    client.pipe(daemon).on('error', () => client.destroy())
    daemon.pipe(client).on('error', () => daemon.destroy())
    client.on('error', () => daemon.destroy()).on('close', () => daemon.destroy())
    daemon.on('error', () => client.destroy()).on('close', () => client.destroy())
  })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  return {
    host: `tcp://127.0.0.1:${(server.address() as AddressInfo).port}`,
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  }
}

/**
 * Runs conch in a PID namespace of its own with its own /proc (the container's processes are not
 * in it) and `hostname`: as on another machine than the daemon's, when the hostname is another.
 */
const elsewhere = (hostname: string) => ['unshare', '--pid', '--fork', '--mount-proc', '--uts', '--', 'sh', '-c', 'hostname "$0" && "$@"; exit $?', hostname]

/**
 * Runs conch with its own hostname (the same pid, exec'd): the conchs of other tests on this
 * machine, which sweep the containers of every gone conch of theirs, leave its containers alone.
 */
const named = (hostname: string) => ['unshare', '--uts', '--', 'sh', '-c', 'hostname "$0" && exec "$@"', hostname]

/** Starts a `conch run` whose send runs `sleep 600` in its container; resolves once it does, with the container's id. */
async function sleepingRun(name: string, options: { launcher?: string[]; cwd?: string } = {}): Promise<{ conch: ReturnType<typeof startConch>; id: string }> {
  const { launcher, cwd } = options
  const script = ws.write(`${name}.jsonl`, [step('', [open]), step('', [send('sleep 600')]), step('Done.')].join('\n'))
  const config = writeComposition(ws.dir, dockerComposition(script), `${name}.yml`)
  const conch = startConch(['run', '--config', config, '--output', 'stream-json', ...(cwd === undefined ? [] : ['--cwd', cwd]), 'go'], {
    cwd: ws.dir,
    ...(launcher !== undefined && { launcher }),
  })
  for (;;) {
    const [info] = await docker.listContainers({ filters: { label: [`conch.owner-pid=${conch.child.pid}`] } })
    if (info !== undefined) {
      const { Processes } = await docker.getContainer(info.Id).top({ ps_args: '-o pid,args' })
      if ((Processes ?? []).some((row: string[]) => row[1] === 'sleep 600')) return { conch, id: info.Id }
    }
    if (conch.child.exitCode !== null) throw new Error(`conch exited before the send started: ${conch.stderr()}`)
    await delay(50)
  }
}

describe.skipIf(dockerSkip)('conch run with the Docker provider', () => {
  it("a conch killed with SIGKILL mid-send leaves its labelled container, which the next run removes", async () => {
    const { conch, id } = await sleepingRun('killed')
    conch.child.kill('SIGKILL')
    await conch.exit
    expect((await docker.getContainer(id).inspect()).State.Running).toBe(true)
    // The daemon made an empty folder in the workspace for each missing deny-write entry it holds.
    expect(existsSync(join(ws.dir, '.mcp.json'))).toBe(true)
    // And one for the missing folder of `.git/hooks/`, the container's own.
    expect(existsSync(join(ws.dir, '.git'))).toBe(true)

    const next = ws.write('next.jsonl', [step('', [open]), step('', [send('echo NEXT-RUN')]), step('Done.')].join('\n'))
    const result = await runConch(['run', '--config', writeComposition(ws.dir, dockerComposition(next), 'next.yml'), '--output', 'stream-json', 'go'], { cwd: ws.dir })
    expect(result.code, result.stderr).toBe(0)
    const texts = jsonLines(result.stdout).filter((line) => line['type'] === 'tool_result').map((line) => String(line['text']))
    expect(texts[1]).toMatch(/^NEXT-RUN$/m)
    await expect(docker.getContainer(id).inspect()).rejects.toMatchObject({ statusCode: 404 })
    // Nothing of either run is left: no container of a conch that is gone, no relay on the host.
    const containers = await docker.listContainers({ all: true, filters: { label: ['conch.agent'] } })
    expect(containers.filter((info) => !existsSync(`/proc/${info.Labels['conch.owner-pid']}`))).toEqual([])
    expect(naming(id)).toEqual([])
    // Nor the folders the killed run's container held, nor its private folders on the host: the
    // sweep removed them with it.
    expect(['.mcp.json', '.vscode', '.bashrc', '.git'].filter((name) => existsSync(join(ws.dir, name)))).toEqual([])
    expect(readdirSync(tmpdir()).filter((name) => new RegExp(`^conch-docker-run-\\d+-${conch.child.pid}-`).test(name))).toEqual([])
  })

  it('conch gc removes the container of a conch killed with SIGKILL and the folders it held, and leaves a running conch\'s container', async () => {
    // The live run first: a run that starts later sweeps the killed one's container itself.
    const host = named(`conch-gc-${process.pid}`)
    const live = await sleepingRun('live', { launcher: host })
    try {
      const elsewhere = join(ws.dir, 'killed')
      mkdirSync(elsewhere)
      const killed = await sleepingRun('killed', { launcher: host, cwd: elsewhere })
      killed.conch.child.kill('SIGKILL')
      await killed.conch.exit
      // The empty folders the daemon made in its workspace for the deny-write entries it holds.
      const held = JSON.parse((await docker.getContainer(killed.id).inspect()).Config.Labels['conch.held']!) as string[]
      expect(held).toContain(join(elsewhere, '.mcp.json'))
      const config = writeComposition(ws.dir, dockerComposition(ws.write('none.jsonl', step('Done.'))), 'gc.yml')
      const gc = await runConch(['gc', '--config', config, '--output', 'json'], { cwd: ws.dir, launcher: host })
      expect(gc.code, gc.stderr).toBe(0)
      const { removed } = JSON.parse(gc.stdout) as { removed: { provider: string; kind: string; name: string }[] }
      expect(removed.filter((item) => item.kind === 'container')).toEqual([{ provider: 'docker', kind: 'container', name: killed.id }])
      expect(removed).toEqual(expect.arrayContaining(held.map((path) => ({ provider: 'docker', kind: 'folder', name: path }))))
      // Besides those, only private host folders of conchs that are gone (the killed run's, and any
      // another test's killed conch left in this PID namespace).
      const others = removed.filter((item) => item.kind === 'folder' && !held.includes(item.name))
      expect(others.filter((item) => !/^conch-docker-(net|run)-\d+-\d+-\d+-/.test(basename(item.name)) || existsSync(`/proc/${basename(item.name).split('-')[4]}`))).toEqual([])
      await expect(docker.getContainer(killed.id).inspect()).rejects.toMatchObject({ statusCode: 404 })
      expect(held.filter((path) => existsSync(path))).toEqual([])
      expect((await docker.getContainer(live.id).inspect()).State.Running).toBe(true)
      // The folders the live run's container holds (the daemon made them) stay.
      expect(existsSync(join(ws.dir, '.mcp.json'))).toBe(true)
      // A second sweep finds nothing of either (the text output: a line per thing removed).
      const again = await runConch(['gc', '--config', config], { cwd: ws.dir, launcher: host })
      expect(again.code, again.stderr).toBe(0)
      expect(again.stdout).toBe('nothing to remove (swept: docker)\n')
    } finally {
      live.conch.child.kill('SIGTERM')
      await live.conch.exit
    }
    await expect(docker.getContainer(live.id).inspect()).rejects.toMatchObject({ statusCode: 404 })
  })

  it("conch gc in another PID namespace of the same hostname leaves a running conch's container (it cannot see that conch)", async () => {
    const name = `conch-gc-ns-${process.pid}`
    const live = await sleepingRun('live', { launcher: named(name) })
    try {
      const config = writeComposition(ws.dir, dockerComposition(ws.write('none.jsonl', step('Done.'))), 'gc.yml')
      const gc = await runConch(['gc', '--config', config, '--output', 'json'], { cwd: ws.dir, launcher: elsewhere(name) })
      expect(gc.code, gc.stderr).toBe(0)
      expect(JSON.parse(gc.stdout)).toEqual({ swept: ['docker'], removed: [] })
      expect((await docker.getContainer(live.id).inspect()).State.Running).toBe(true)
    } finally {
      live.conch.child.kill('SIGTERM')
      await live.conch.exit
    }
  })

  it('with a daemon whose processes this host cannot see, bash sends settle on the prompt marker, a forged one does not, and a REPL settles on silence', async () => {
    // A marker without the session's nonce, and one with a guessed nonce, each followed by `$ `.
    const forger = String.raw`printf '\033]6973;prompt;0\007$ '; sleep 1; printf '\033]6973;0123456789abcdef;prompt;0\007$ '; sleep 1; echo FORGER-DONE-$((6*7))`
    const script = ws.write(
      'remote.jsonl',
      [
        step('', [open]),
        step('', [send('echo remote-$((6*7))')]),
        step('', [send(forger)]),
        step('', [send('python3 -q', 1500)]),
        step('', [send('print(6*7)', 1500)]),
        step('', [send('exit()')]),
        step('Done.'),
      ].join('\n'),
    )
    const daemon = await tcpDaemon()
    const hostname = `conch-remote-${process.pid}`
    try {
      const result = await runConch(['run', '--config', writeComposition(ws.dir, dockerComposition(script), 'remote.yml'), '--output', 'stream-json', 'go'], {
        cwd: ws.dir,
        env: { DOCKER_HOST: daemon.host },
        launcher: elsewhere(hostname),
      })
      expect(result.code, result.stderr).toBe(0)
      const results = jsonLines(result.stdout).filter((line) => line['type'] === 'tool_result')
      const sent = results.slice(1).map((line) => ({ text: String(line['text']), meta: line['meta'] as { waitReason: string; evidence: { tier: string; detail: string } } }))
      const prompt = { waitReason: 'stdin_read', evidence: { tier: 'prompt', detail: expect.stringMatching(/its marker only/) } }
      expect(sent[0]!.meta).toMatchObject(prompt)
      expect(sent[0]!.text).toMatch(/^remote-42$/m)
      // The forged markers did not settle the send: it ended at the shell's own prompt, after the forger.
      expect(sent[1]!.meta).toMatchObject(prompt)
      expect(sent[1]!.text).toMatch(/FORGER-DONE-42$/m)
      // python3 is read by nothing this host can see: silence, with the note.
      expect(sent[2]!.meta).toMatchObject({ waitReason: 'inferred_idle', evidence: { tier: 'silence' } })
      expect(sent[3]!.meta.waitReason).toBe('inferred_idle')
      expect(sent[3]!.text).toMatch(/^42$/m)
      expect(sent[3]!.text).toContain('[note: output went quiet')
      expect(sent[4]!.meta).toMatchObject(prompt)
      // The agent's end removed its container.
      expect(await docker.listContainers({ all: true, filters: { label: [`conch.owner-host=${hostname}`] } })).toEqual([])
    } finally {
      await daemon.close()
    }
  })

  it('examples/docker/cordis.yml runs a terminal and a run_code program in one container of the test image', async () => {
    const code = 'const fs = require("node:fs"); return fs.readFileSync("/tmp/mark", "utf8").trim() + " " + fs.existsSync("/.dockerenv")'
    const script = ws.write(
      'example.jsonl',
      [
        step('', [open]),
        step('', [send('test -f /.dockerenv && echo in-container-$((6*7)) | tee /tmp/mark')]),
        step('', [{ name: 'run_code', arguments: { code } }]),
        step('Done.'),
      ].join('\n'),
    )
    const example = fileURLToPath(new URL('../../../examples/docker/cordis.yml', import.meta.url))
    const state = mkdtempSync(join(tmpdir(), 'conch-docker-state-'))
    try {
      const result = await runConch(['run', '--config', example, '--script', script, '--output', 'stream-json', 'go'], {
        cwd: ws.dir,
        env: { CONCH_DOCKER_IMAGE: TEST_IMAGE, XDG_STATE_HOME: state },
      })
      expect(result.code, result.stderr).toBe(0)
      const texts = jsonLines(result.stdout).filter((line) => line['type'] === 'tool_result').map((line) => String(line['text']))
      expect(texts[1]).toMatch(/^in-container-42$/m)
      expect(texts[2]).toMatch(/^"in-container-42 true"$/m)
    } finally {
      rmSync(state, { recursive: true, force: true })
    }
  })

  it("a sub-agent of examples/docker/cordis.yml works in a container of its own, and neither is left", async () => {
    const child = ws.write(
      'child.jsonl',
      [step('', [open]), step('', [send('cat /etc/hostname > child-host.txt; echo child > /tmp/child-mark; echo wrote=$?')]), step('child done')].join('\n'),
    )
    const parent = ws.write(
      'parent.jsonl',
      [
        step('', [open]),
        step('', [{ name: 'subagent', arguments: { prompt: 'go' } }]),
        step('', [send('test "$(cat child-host.txt)" != "$(cat /etc/hostname)" && echo other-container; test -e /tmp/child-mark || echo no-child-tmp')]),
        step('Done.'),
      ].join('\n'),
    )
    const example = fileURLToPath(new URL('../../../examples/docker/cordis.yml', import.meta.url))
    const state = mkdtempSync(join(tmpdir(), 'conch-docker-state-'))
    try {
      const conch = startConch(['run', '--config', example, '--script', parent, '--output', 'stream-json', 'go'], {
        cwd: ws.dir,
        env: { CONCH_DOCKER_IMAGE: TEST_IMAGE, CONCH_SUBAGENT_SCRIPT: child, XDG_STATE_HOME: state },
      })
      expect(await conch.exit, conch.stderr()).toBe(0)
      const texts = jsonLines(conch.stdout()).filter((line) => line['type'] === 'tool_result').map((line) => String(line['text']))
      expect(texts[1]).toMatch(/^child done\n\[subagent: conch, stop: completed/)
      expect(texts[2]).toMatch(/^other-container$/m)
      expect(texts[2]).toMatch(/^no-child-tmp$/m)
      expect(existsSync(join(ws.dir, 'child-host.txt'))).toBe(true)
      const containers = await docker.listContainers({ all: true, filters: { label: ['conch.agent'] } })
      expect(containers.filter((info) => !existsSync(`/proc/${info.Labels['conch.owner-pid']}`))).toEqual([])
      expect(containers.filter((info) => info.Labels['conch.owner-pid'] === String(conch.child.pid))).toEqual([])
    } finally {
      rmSync(state, { recursive: true, force: true })
    }
  })
})
