/**
 * Attacks on the trust boundary, tried for real: a `conch run` child process with the root
 * composition's services (the sandbox under workspace-write, real bubblewrap), a scripted model
 * acting as the hostile agent, and assertions on what reached the terminal and the host.
 */
import { randomInt } from 'node:crypto'
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs'
import { join } from 'node:path'
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest'
import { terminalComposition, writeComposition } from '@conch/test-support/composition'
import { markedProcesses } from '@conch/test-support/procs'
import { KEPT_VARIABLES, SECRET_VARIABLES, TOKEN_VALUES } from '@conch/test-support/secrets'
import { eventually } from '@conch/test-support/wait'
import { jsonLines, processesWith, runConch, startConch, step, workspace, type Workspace } from './harness.ts'

// Each test boots a composition and opens at least one sandboxed shell.
vi.setConfig({ testTimeout: 90_000 })

interface Rows {
  script: string
  mode?: 'read-only' | 'workspace-write' | 'danger-full-access'
  sessions?: Record<string, unknown>
  ptyLocal?: Record<string, unknown>
}

/** The terminal composition with the scripted model and the task tools, under workspace-write unless `mode` says. */
const composition = (rows: Rows) => terminalComposition({ ...rows, mode: rows.mode ?? 'workspace-write', tasks: true })

export interface ToolResultLine {
  type: 'tool_result'
  name: string
  isError: boolean
  text: string
  meta?: Record<string, unknown>
}

export function toolResults(stdout: string): ToolResultLine[] {
  return jsonLines(stdout).filter((line) => line['type'] === 'tool_result') as unknown as ToolResultLine[]
}

let ws: Workspace

beforeEach(() => {
  ws = workspace()
})

afterEach(() => {
  ws.remove()
})

describe('secret scrubbing through a real confined terminal', () => {
  it('lets none of the secret-bearing variables reach the shell, and passes allow-listed ones', async () => {
    const script = ws.write(
      'script.jsonl',
      [
        step('', [{ name: 'terminal_open', arguments: { type: 'shell' } }]),
        // One variable per line, values base64-encoded so multi-line values stay on their line.
        step('', [{ name: 'terminal_send', arguments: { sessionId: 'pty-1', text: 'for v in $(compgen -e); do printf "%s=%s\\n" "$v" "$(printf %s "${!v}" | base64 -w0)"; done; echo env-listed' } }]),
        step('Done.'),
      ].join('\n'),
    )
    const config = writeComposition(ws.dir, composition({ script, ptyLocal: { allowEnv: ['HF_TOKEN', 'npm_config_c*'] } }))
    const env = { ...SECRET_VARIABLES, ...TOKEN_VALUES, ...KEPT_VARIABLES, PATH: process.env['PATH'] ?? '/usr/bin:/bin', HF_TOKEN: 'hf-allowed', npm_config_cache: '/allowed-cache' }
    const run = await runConch(['run', '--config', config, '--output', 'stream-json', 'list the environment'], { cwd: ws.dir, env })
    expect(run.stderr).toBe('')
    expect(run.code).toBe(0)
    const [, listing] = toolResults(run.stdout)
    expect(listing!.text).toContain('env-listed')
    const seen = new Map<string, string>()
    for (const line of listing!.text.split('\n')) {
      const match = /^([A-Za-z_][A-Za-z0-9_]*)=([A-Za-z0-9+/=]*)$/.exec(line)
      if (match) seen.set(match[1]!, Buffer.from(match[2]!, 'base64').toString('utf8'))
    }
    for (const name of [...Object.keys(SECRET_VARIABLES), ...Object.keys(TOKEN_VALUES)]) {
      expect(seen.has(name), `${name} reached the shell`).toBe(false)
    }
    // The values under any name: nothing of them is anywhere in the listing.
    for (const value of [...Object.values(SECRET_VARIABLES), ...Object.values(TOKEN_VALUES)]) {
      for (const other of seen.values()) expect(other.includes(value), `a secret value reached the shell: ${value}`).toBe(false)
    }
    expect(seen.get('HF_TOKEN')).toBe('hf-allowed')
    expect(seen.get('npm_config_cache')).toBe('/allowed-cache')
    expect(seen.get('GIT_AUTHOR_NAME')).toBe('Ada')
    expect(seen.get('PNPM_HOME')).toBe(KEPT_VARIABLES['PNPM_HOME'])
    expect(seen.has('npm_config_registry')).toBe(false)
  })
})

describe('session logs the sandbox can neither redirect nor edit', () => {
  it('refuses, naming the path, a log folder a confined terminal replaced with a symlink, and writes nothing where it points', async () => {
    // The unsafe layout the attack needs: logs inside the workspace, allowed on purpose.
    const outside = mkdtempSync('/var/tmp/conch-redirect-target-')
    try {
      const logs = join(ws.dir, '.conch', 'sessions')
      const attack = ws.write(
        'attack.jsonl',
        [
          step('', [{ name: 'terminal_open', arguments: { type: 'shell' } }]),
          step('', [{ name: 'terminal_send', arguments: { sessionId: 'pty-1', text: `rm -rf .conch/sessions && ln -s ${outside} .conch/sessions && echo planted-$((6*7))` } }]),
          step('Planted.'),
        ].join('\n'),
      )
      const sessions = { dir: logs, allowInsideWorkspace: true }
      const first = await runConch(['run', '--config', writeComposition(ws.dir, composition({ script: attack, sessions }), 'attack.yml'), '--output', 'stream-json', 'plant'], { cwd: ws.dir })
      // A log is opened for each write, so the run that planted the link meets it at the next
      // write (the send's own result) and stops there, naming it.
      expect(first.code).toBe(1)
      expect(first.stdout).toContain('"type":"result","status":"error"')
      expect(first.stderr).toContain(`session log folder component ${logs} is a symbolic link`)
      expect(readdirSync(outside)).toEqual([])

      const next = ws.write('next.jsonl', step('Hello.'))
      const second = await runConch(['run', '--config', writeComposition(ws.dir, composition({ script: next, sessions }), 'next.yml'), '--output', 'stream-json', 'next run'], { cwd: ws.dir })
      expect(second.code).toBe(1)
      expect(second.stderr).toContain(`session log folder component ${logs} is a symbolic link`)
      expect(readdirSync(outside)).toEqual([])
    } finally {
      rmSync(outside, { recursive: true, force: true })
    }
  })

  it('keeps logs outside the workspace by default, where a later session\'s confined terminal cannot edit them', async () => {
    // Not under /tmp: the sandbox gives terminals a private /tmp, and the point is that the
    // folder is visible (read-only) to them.
    const state = mkdtempSync('/var/tmp/conch-state-')
    try {
      const env = { XDG_STATE_HOME: state }
      const first = await runConch(['run', '--config', writeComposition(ws.dir, composition({ script: ws.write('first.jsonl', step('Remember me.')), sessions: { persist: true } }), 'first.yml'), 'remember'], { cwd: ws.dir, env })
      expect(first.code, first.stderr).toBe(0)
      const [folder] = readdirSync(join(state, 'conch', 'sessions'))
      const dir = join(state, 'conch', 'sessions', folder!)
      const [name] = readdirSync(dir)
      const log = join(dir, name!)
      const before = readFileSync(log, 'utf8')
      expect(before).toContain('Remember me.')
      expect(readdirSync(ws.dir).filter((entry) => entry.startsWith('.conch'))).toEqual([])

      const edit = ws.write(
        'edit.jsonl',
        [
          step('', [{ name: 'terminal_open', arguments: { type: 'shell' } }]),
          step('', [{ name: 'terminal_send', arguments: { sessionId: 'pty-1', text: `cat ${log} | wc -l; echo forged >> ${log}; sed -i s/Remember/Forgot/ ${log}; rm -f ${log}; echo tried-$((6*7))` } }]),
          step('Tried.'),
        ].join('\n'),
      )
      const second = await runConch(['run', '--config', writeComposition(ws.dir, composition({ script: edit, sessions: { persist: true } }), 'edit.yml'), '--output', 'stream-json', 'edit'], { cwd: ws.dir, env })
      expect(second.code, second.stderr).toBe(0)
      const attempt = toolResults(second.stdout)[1]!.text
      expect(attempt).toContain('tried-42')
      expect(attempt).toContain('Read-only file system')
      expect(readFileSync(log, 'utf8')).toBe(before)
      // The later session wrote its own log next to the first one.
      expect(readdirSync(dir)).toHaveLength(2)
    } finally {
      rmSync(state, { recursive: true, force: true })
    }
  })
})

describe('task_kill of a background send whose program ignores SIGINT', () => {
  it('escalates to SIGTERM, then SIGKILL, says which signals it took, and leaves nothing running', async () => {
    const nap = `sleep 61.${randomInt(100000, 999999)}`
    const stubborn = `sleep 62.${randomInt(100000, 999999)}`
    const send = (text: string, background = false) =>
      step('', [{ name: 'terminal_send', arguments: { sessionId: 'pty-1', text, ...(background ? { run_in_background: true } : {}) } }])
    const script = ws.write(
      'script.jsonl',
      [
        step('', [{ name: 'terminal_open', arguments: { type: 'shell' } }]),
        // Ignored signals are inherited by every command the shell starts (trap '' in bash(1)).
        send("trap '' INT"),
        send(nap, true),
        step('', [{ name: 'task_kill', arguments: { taskId: 'task-1' } }]),
        send("trap '' INT TERM"),
        send(stubborn, true),
        step('', [{ name: 'task_kill', arguments: { taskId: 'task-2' } }]),
        send(`trap - INT TERM; pgrep -f "sleep 6[12][.]" || echo none-left-$((6*7))`),
        step('Done.'),
      ].join('\n'),
    )
    const config = writeComposition(ws.dir, composition({ script }))
    const run = await runConch(['run', '--config', config, '--output', 'stream-json', 'kill them'], { cwd: ws.dir })
    expect(run.stderr).toBe('')
    expect(run.code).toBe(0)
    const results = toolResults(run.stdout)
    const kills = results.filter((result) => result.name === 'task_kill')
    expect(kills[0]!.text).toMatch(/\[status: killed, wait: stdin_read, signals: SIGINT then SIGTERM\]$/)
    expect(kills[1]!.text).toMatch(/\[status: killed, wait: stdin_read, signals: SIGINT then SIGTERM then SIGKILL\]$/)
    expect(results.at(-1)!.text).toContain('none-left-42')
    expect(processesWith(nap)).toEqual([])
    expect(processesWith(stubborn)).toEqual([])
  })
})

describe.runIf(process.platform === 'linux')('an unconfined terminal when conch is killed with SIGKILL', () => {
  it('leaves no setsid daemon behind: the tag supervisor sweeps it, then exits itself', async () => {
    const daemon = `sleep 1234.${randomInt(100000, 999999)}`
    const script = ws.write(
      'script.jsonl',
      [
        step('', [{ name: 'terminal_open', arguments: { type: 'shell' } }]),
        step('', [{ name: 'terminal_send', arguments: { sessionId: 'pty-1', text: `setsid ${daemon} >/dev/null 2>&1 </dev/null & echo started-$((6*7))` } }]),
        // Holds the run (and conch) while the test kills it.
        step('', [{ name: 'terminal_send', arguments: { sessionId: 'pty-1', text: 'sleep 300' } }]),
        step('Unreachable.'),
      ].join('\n'),
    )
    const config = writeComposition(ws.dir, composition({ script, mode: 'danger-full-access' }))
    const conch = startConch(['run', '--config', config, '--output', 'stream-json', 'start a daemon'], { cwd: ws.dir })
    const pid = conch.child.pid!
    try {
      // The daemon has started once the first send's result is out (its output holds the token).
      expect(await eventually(() => conch.stdout().includes('started-42'), 60_000), conch.stderr()).toBe(true)
      expect(await eventually(() => processesWith(daemon).length === 1, 10_000)).toBe(true)
      expect(markedProcesses('CONCH_SUPERVISOR_OF', String(pid))).toHaveLength(1)

      process.kill(pid, 'SIGKILL')
      expect(await conch.exit).toBe(137)

      expect(await eventually(() => processesWith(daemon).length === 0, 10_000), `${daemon} survived conch`).toBe(true)
      expect(await eventually(() => markedProcesses('CONCH_SUPERVISOR_OF', String(pid)).length === 0, 10_000), 'the supervisor outlived its sweep').toBe(true)
    } finally {
      for (const leftover of processesWith(daemon)) process.kill(leftover, 'SIGKILL')
    }
  })
})
