/**
 * The wrapper every shell starts through runs on the host, outside any sandbox, with the shell's
 * environment: a program planted where its PATH looks (a workspace's node_modules/.bin, a relative
 * or an empty entry), or a file its BASH_ENV names, must never run there. Real bash under the real
 * sandbox, as root.
 */
import { chmodSync, existsSync, mkdirSync, mkdtempSync, realpathSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import path from 'node:path'
import { Context } from 'cordis'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import AgentService from '@conch/agent'
import LlmService from '@conch/llm'
import PtyService from '@conch/pty'
import SandboxService from '@conch/sandbox'
import * as sandboxLocal from '@conch/sandbox-local'
import SandboxPolicyService from '@conch/sandbox-policy'
import SessionService from '@conch/session'
import ToolsService from '@conch/tools'
import * as ptyLocal from '../src/index.ts'

let workspace: string
let host: string
const originalPath = process.env.PATH

beforeAll(() => {
  workspace = realpathSync(mkdtempSync(path.join(tmpdir(), 'conch-wrapper-ws-')))
  host = realpathSync(mkdtempSync(path.join(tmpdir(), 'conch-wrapper-host-')))
  // The planted stty records where it ran, in a host folder the sandbox does not show.
  const planted = `#!/bin/sh\necho "$0" >> ${host}/ran\n`
  for (const folder of ['node_modules/.bin', 'bin', '.']) {
    mkdirSync(path.join(workspace, folder), { recursive: true })
    writeFileSync(path.join(workspace, folder, 'stty'), planted)
    chmodSync(path.join(workspace, folder, 'stty'), 0o755)
  }
  // An absolute folder in the workspace, a relative entry and an empty one (the working directory) first.
  process.env.PATH = `${path.join(workspace, 'node_modules/.bin')}:bin::${originalPath}`
  // A relative BASH_ENV names a file in the working directory: a non-interactive bash sources it.
  writeFileSync(path.join(workspace, '.bashenv'), `echo "BASH_ENV $$" >> ${host}/ran\n`)
  process.env.BASH_ENV = '.bashenv'
})

afterAll(() => {
  process.env.PATH = originalPath
  delete process.env.BASH_ENV
  rmSync(workspace, { recursive: true, force: true })
  rmSync(host, { recursive: true, force: true })
})

async function compose(mode: 'read-only' | 'workspace-write') {
  const root = new Context()
  const fibers: { dispose(): Promise<void> }[] = []
  for (const [plugin, config] of [
    [SessionService, {}],
    [ToolsService, {}],
    [LlmService, {}],
    [AgentService, {}],
    [SandboxService, {}],
    [sandboxLocal, {}],
    [SandboxPolicyService, { mode, workspaceRoot: workspace }],
    [PtyService, {}],
    [ptyLocal, {}],
  ] as const) {
    fibers.push(await root.plugin(plugin as never, config as never))
  }
  const agent = await root.agents.create()
  return { pty: root.pty as PtyService, agent, dispose: async () => { for (const fiber of fibers.reverse()) await fiber.dispose() } }
}

describe.runIf(process.platform === 'linux')('the wrapper a shell starts through', () => {
  for (const mode of ['workspace-write', 'read-only'] as const) {
    it(`runs no stty planted on PATH in the workspace and sources no BASH_ENV (${mode}), and still sets IUTF8`, async () => {
      const { pty, agent, dispose } = await compose(mode)
      try {
        const { sessionId } = await pty.spawn(agent, { type: 'shell' })
        const opened = await pty.spawn(agent, { type: 'shell', cwd: path.join(workspace, 'bin') })
        expect(existsSync(path.join(host, 'ran')), 'a planted stty or BASH_ENV ran on the host').toBe(false)
        for (const id of [sessionId, opened.sessionId]) {
          // The system's stty, inside the sandbox: the flag the wrapper set on the host.
          const result = await pty.startSend(agent, id, { text: '/bin/stty -a | tr " " "\\n" | grep -x -- "-\\?iutf8"', submit: true }).done
          expect(result.viewport).toMatch(/^iutf8$/m)
        }
      } finally {
        await dispose()
      }
    })
  }
})
