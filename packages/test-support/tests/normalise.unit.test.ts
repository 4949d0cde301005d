/**
 * The snapshot harness's own rules (run with the snapshot suites, `pnpm test:snapshot`).
 */
import { mkdtempSync, rmSync, symlinkSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterEach, describe, expect, it } from 'vitest'
import { collapseLiveOutput, Normaliser, renumberIds } from '../src/snapshot/index.ts'

const dirs: string[] = []
afterEach(() => {
  for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true })
})

describe('Normaliser', () => {
  it('replaces the workspace by the path it was given and by its real path', () => {
    const real = mkdtempSync(join(tmpdir(), 'conch-normalise-'))
    const link = `${real}-link`
    symlinkSync(real, link)
    dirs.push(real, link)
    const normaliser = new Normaliser({ kind: 'pinned', workspaces: [link] })
    expect(normaliser.text(`cd ${link}/src && ls ${real}/lib`)).toBe('cd <workspace>/src && ls <workspace>/lib')
  })

  it('numbers session ids in order of appearance and keeps the numbering across values', () => {
    const normaliser = new Normaliser({ kind: 'pinned', workspaces: [] })
    expect(normaliser.value({ a: 'session-0000beef', b: ['session-1234abcd', 'session-0000beef'] })).toEqual({ a: 'session-1', b: ['session-2', 'session-1'] })
    expect(normaliser.text('session-1234abcd')).toBe('session-2')
  })

  it('replaces the wall time of a run_code status line in every run', () => {
    const normaliser = new Normaliser({ kind: 'pinned', workspaces: [] })
    expect(normaliser.text('42\n[run_code: ok in 41 ms, 3 tool calls]')).toBe('42\n[run_code: ok in <ms> ms, 3 tool calls]')
    expect(normaliser.text('[run_code: worker-exit after 7 ms, 0 tool calls]')).toBe('[run_code: worker-exit after <ms> ms, 0 tool calls]')
  })

  it('replaces clock times in every run, and leaves pids and durations of a pinned run alone', () => {
    const normaliser = new Normaliser({ kind: 'pinned', workspaces: [] })
    expect(normaliser.value({ startedAt: '2026-01-05T10:00:00.000Z', elapsedMs: 3000, pid: 100, text: 'stopped bash[100]' })).toEqual({
      startedAt: '<time>',
      elapsedMs: 3000,
      pid: 100,
      text: 'stopped bash[100]',
    })
  })

  it('replaces pids, terminal devices, durations and readiness evidence in a real run', () => {
    const normaliser = new Normaliser({ kind: 'real', workspaces: [] })
    expect(
      normaliser.value({
        text: 'shell pid 4242 on /dev/pts/7\npython3[4250] reads',
        meta: { elapsedMs: 321, evidence: { tier: 'proc', detail: 'python3[4250] pselect6 fd0 /dev/pts/7' }, sessions: [{ pid: 4242 }] },
      }),
    ).toEqual({
      text: 'shell pid <pid> on /dev/pts/<n>\npython3[<pid>] reads',
      meta: { elapsedMs: '<ms>', evidence: '<evidence>', sessions: [{ pid: '<pid>' }] },
    })
  })

  it('replaces what a real close stopped and how the shell ended, and nothing else of the result', () => {
    const normaliser = new Normaliser({ kind: 'real', workspaces: [] })
    expect(normaliser.text('[closed: pty-1 — stopped 4 processes: bash ×2, stty, sh]\n[session: exited code=129]')).toBe(
      '[closed: pty-1 — stopped <processes>]\n[session: exited <status>]',
    )
    expect(normaliser.text('[session: exited code=3]')).toBe('[session: exited code=3]')
    expect(
      normaliser.value({ sessionId: 'pty-1', status: { state: 'exited', exitCode: null, signal: 'SIGHUP' }, stopped: [{ pid: 1, name: 'bash' }], survivors: [] }),
    ).toEqual({ sessionId: 'pty-1', status: '<status>', stopped: '<processes>', survivors: [] })
    expect(normaliser.value({ sessionStatus: { state: 'exited', exitCode: 3 } })).toEqual({ sessionStatus: { state: 'exited', exitCode: 3 } })
  })
})

describe('renumberIds', () => {
  it('numbers JSON-RPC ids from 1 in order of first appearance and leaves notifications alone', () => {
    expect(
      renumberIds([
        { jsonrpc: '2.0', id: 7, result: {} },
        { jsonrpc: '2.0', method: 'session/update' },
        { jsonrpc: '2.0', id: 3, result: {} },
        { jsonrpc: '2.0', id: null, error: {} },
      ]),
    ).toEqual([
      { jsonrpc: '2.0', id: 1, result: {} },
      { jsonrpc: '2.0', method: 'session/update' },
      { jsonrpc: '2.0', id: 2, result: {} },
      { jsonrpc: '2.0', id: null, error: {} },
    ])
  })
})

describe('collapseLiveOutput', () => {
  const live = (call: string, text: string) => ({
    method: 'session/update',
    params: { update: { sessionUpdate: 'tool_call_update', toolCallId: call, content: [{ type: 'content', content: { type: 'text', text } }] } },
  })
  const done = (call: string) => ({ method: 'session/update', params: { update: { sessionUpdate: 'tool_call_update', toolCallId: call, status: 'completed' } } })

  it('keeps the last of each run of live-output updates of one call', () => {
    expect(collapseLiveOutput([live('c1', 'a'), live('c1', 'ab'), live('c1', 'abc'), done('c1'), live('c2', 'x'), live('c2', 'xy')])).toEqual([
      live('c1', 'abc'),
      done('c1'),
      live('c2', 'xy'),
    ])
  })

  it('does not merge live output of different calls', () => {
    expect(collapseLiveOutput([live('c1', 'a'), live('c2', 'b'), live('c1', 'ac')])).toEqual([live('c1', 'a'), live('c2', 'b'), live('c1', 'ac')])
  })
})
