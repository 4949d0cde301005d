/**
 * `conch run` with the Docker provider (against the real daemon, as root): a conch killed with
 * SIGKILL mid-send leaves its agent's labelled container, and the next run removes it; the example
 * composition runs terminals, run_code and a sub-agent in containers.
 */
import { existsSync, mkdtempSync, readdirSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
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
const send = (text: string) => ({ name: 'terminal_send', arguments: { sessionId: 'pty-1', text, timeoutMs: 60_000, idleMs: 60_000 } })

describe.skipIf(dockerSkip)('conch run with the Docker provider', () => {
  it("a conch killed with SIGKILL mid-send leaves its labelled container, which the next run removes", async () => {
    const script = ws.write('killed.jsonl', [step('', [open]), step('', [send('sleep 600')]), step('Done.')].join('\n'))
    const conch = startConch(['run', '--config', writeComposition(ws.dir, dockerComposition(script), 'killed.yml'), '--output', 'stream-json', 'go'], { cwd: ws.dir })
    const sleeping = async (): Promise<string> => {
      for (;;) {
        const [info] = await docker.listContainers({ filters: { label: [`conch.owner-pid=${conch.child.pid}`] } })
        if (info !== undefined) {
          const { Processes } = await docker.getContainer(info.Id).top({ ps_args: '-o pid,args' })
          if ((Processes ?? []).some((row: string[]) => row[1] === 'sleep 600')) return info.Id
        }
        if (conch.child.exitCode !== null) throw new Error(`conch exited before the send started: ${conch.stderr()}`)
        await delay(50)
      }
    }
    const id = await sleeping()
    conch.child.kill('SIGKILL')
    await conch.exit
    expect((await docker.getContainer(id).inspect()).State.Running).toBe(true)
    // The daemon made an empty folder in the workspace for each missing deny-write entry it holds.
    expect(existsSync(join(ws.dir, '.mcp.json'))).toBe(true)

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
    expect(['.mcp.json', '.vscode', '.bashrc'].filter((name) => existsSync(join(ws.dir, name)))).toEqual([])
    expect(readdirSync(tmpdir()).filter((name) => name.startsWith(`conch-docker-run-${conch.child.pid}-`))).toEqual([])
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
