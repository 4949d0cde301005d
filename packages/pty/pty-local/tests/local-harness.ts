/**
 * Starts real local sessions for tests without a Cordis composition: the backend with an
 * unconfined (danger-full-access) policy, a fake owner, and cleanup of every session a test
 * opened.
 */
import { execFileSync } from 'node:child_process'
import { writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { afterAll, afterEach } from 'vitest'
import type { Agent } from '@conch/agent'
import type { SandboxPolicyServiceApi } from '@conch/sandbox-policy'
import type { SandboxServiceApi } from '@conch/sandbox'
import { LocalBackend } from '../src/backend.ts'
import { Config } from '../src/config.ts'
import { linuxInspector } from '../src/inspector.ts'
import type { LocalSession } from '../src/session.ts'
import { helperTermiosReader } from '../src/termios.ts'

const opened = new Set<LocalSession>()
/** One termios helper per test file, like one per backend plugin. */
const termios = helperTermiosReader()
afterAll(() => termios.close())

afterEach(async () => {
  const sessions = [...opened]
  opened.clear()
  await Promise.all(sessions.map((session) => session.close().catch(() => {})))
})

export const owner = { id: 'agent-test', session: { id: 'session-test' } } as unknown as Agent

export function unconfinedBackend(overrides: Partial<Config> = {}, env: NodeJS.ProcessEnv = process.env): LocalBackend {
  const config = Config.parse(overrides)
  const sandboxPolicy = {
    resolve: () => ({ mode: 'danger-full-access', workspaceRoot: process.cwd(), sessionId: 'session-test' }),
  } as unknown as SandboxPolicyServiceApi
  const sandbox = {
    confine: () => Promise.reject(new Error('a danger-full-access test must not confine')),
  } as unknown as SandboxServiceApi
  return new LocalBackend({
    config,
    sandbox,
    sandboxPolicy,
    env,
    termios,
    inspect: (terminal) => linuxInspector({ pid: terminal.pid, ...terminal.slave, path: terminal.slavePath }),
  })
}

/** Opens a session that is closed after the test. */
export async function openSession(
  overrides: Partial<Config> = {},
  options: { env?: NodeJS.ProcessEnv; cwd?: string; signal?: AbortSignal } = {},
): Promise<LocalSession> {
  const backend = unconfinedBackend(overrides, options.env)
  const session = await backend.spawn({
    owner,
    sessionId: 'pty-test',
    ...(options.cwd !== undefined ? { cwd: options.cwd } : {}),
    signal: options.signal ?? new AbortController().signal,
  })
  opened.add(session)
  return session
}

/** Sends `text` (submitted) and returns the settled result. */
export async function send(session: LocalSession, text: string, submit = true) {
  return session.startSend({ text, submit }).done
}

/** Lines of a viewport or page that are exactly `token` (the child's output, not the echoed command). */
export function linesEqual(text: string, token: string): number {
  return text.split('\n').filter((line) => line === token).length
}

/** `dir` as a git repository with two commits (a, b) and `editor` as its core.editor; returns `dir`. */
export function gitRepo(dir: string, editor: string): string {
  const git = (...args: string[]) => execFileSync('git', args, { cwd: dir, stdio: 'ignore' })
  git('init', '-q', '-b', 'main')
  git('config', 'user.name', 'Conch Test')
  git('config', 'user.email', 'conch@example.invalid')
  git('config', 'core.editor', editor)
  for (const name of ['a', 'b']) {
    writeFileSync(join(dir, name), `${name}\n`)
    git('add', name)
    git('commit', '-q', '-m', `add ${name}`)
  }
  return dir
}
