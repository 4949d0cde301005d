/**
 * The text the model sees for terminal tools (every shape: the README, "What the model sees").
 * Compact and stable — scripts and snapshot runs compare it byte for byte — and always within the
 * byte bound (`fit`).
 */
import { beforePrompt, boundScreenText, CONTROLLED_PS1, displayName, parseScreenHeader, processNames, PtyError, type CloseResult, type InputState, type ReadPage, type SendResult, type SessionInfo, type SessionStatus, type SignalResult, type SpawnResult, type StoppedJob, type WaitReason } from '@conch/pty'
import { constants } from 'node:os'
import { boundUtf8, budgetOutput, omissionMarker, summariseBinary, tailShareOf, utf8Bytes, type BudgetOptions, type OmittedRange } from '@conch/tools'
import { unreachable } from '@conch/session'

export const NO_OUTPUT = '(no new output)'
/** The marker of output cut where its amount is not known; counted cuts say `[… N bytes (L lines) omitted; …]`. */
export const TRUNCATED = omissionMarker()

/** A metadata line and the shorter form it falls back to when the bound is tight ('' drops it). */
interface MetaLine {
  text: string
  short?: string
}

/**
 * Joins `body` and metadata lines within `maxBytes` UTF-8 bytes. A body that does not fit keeps
 * its head and its tail around one omission marker (`budgetOutput` of `@conch/tools`: what was
 * dropped, and `page` says how to get it); metadata lines are kept. Below the size of the
 * metadata itself the long lines shorten, then the body goes, and only then is the metadata cut
 * (keeping its head) — so the result always fits.
 */
export function fit(options: {
  body: string
  /** Shown when the body is empty and nothing was cut. */
  empty?: string
  meta: MetaLine[]
  /** Where among the metadata a screen's cut is noted. */
  noticeAt: number
  /** The body was already cut (by the backend). */
  truncated: boolean
  maxBytes: number
  /** What the backend dropped between the body's head and tail, and how to page it. */
  omitted?: OmittedRange
  page?: BudgetOptions['page']
  /** Share of the room kept from the body's end (larger for a failing command). */
  tailShare?: number
  /**
   * The body is a rendered screen (`[screen: …]` header, then rows): when it must be cut it keeps
   * its header, its cursor row and its top rows (`boundScreenText` of `@conch/pty`), not its tail.
   */
  screen?: boolean
}): { text: string; truncated: boolean; cut: boolean } {
  const { body, meta, noticeAt, maxBytes } = options
  // Binary runs summarised (budgetOutput does so itself, after splitting at the backend's gap);
  // a body cut by the backend without counts says so where it was cut: at its start.
  const plain = options.screen === true ? body : summariseBinary(body)
  const marked = options.truncated && options.omitted === undefined && options.screen !== true && plain !== '' ? `${TRUNCATED}\n${plain}` : plain
  for (const compact of [false, true]) {
    const lines = meta.map((line) => (compact && line.short !== undefined ? line.short : line.text))
    const without = lines.filter((line) => line !== '')
    const shown = marked === '' ? (options.truncated ? '' : (options.empty ?? '')) : marked
    if (options.omitted === undefined) {
      const text = join(shown, without)
      if (utf8Bytes(text) <= maxBytes && (!options.truncated || options.screen !== true)) return { text, truncated: options.truncated, cut: false }
    }
    if (options.screen === true) {
      const withNotice = [...lines.slice(0, noticeAt), TRUNCATED, ...lines.slice(noticeAt)].filter((line) => line !== '')
      const budget = maxBytes - utf8Bytes(withNotice.join('\n')) - 1
      const screen = budget >= 0 ? boundScreenText(body, budget) : undefined
      if (screen !== undefined) return { text: join(screen.text, withNotice), truncated: true, cut: screen.truncated }
    }
    const budget = maxBytes - utf8Bytes(without.join('\n')) - 1
    // The marker with its paging hint, else without it (a tiny bound), else no body at all.
    for (const page of [options.page, undefined]) {
      const kept = tryBudget(body, budget, { ...(options.omitted && { omitted: options.omitted }), ...(page && { page }), ...(options.tailShare !== undefined && { tailShare: options.tailShare }) })
      if (kept !== undefined) return { text: join(kept.text, without), truncated: true, cut: kept.truncated }
    }
  }
  // Not even the short metadata fits: keep its head, which holds the most important lines.
  const lines = meta.map((line) => line.short ?? line.text)
  const metaText = [...lines.slice(0, noticeAt), TRUNCATED, ...lines.slice(noticeAt)].filter((line) => line !== '').join('\n')
  return { text: boundUtf8(metaText, maxBytes, { keep: 'head' }).text, truncated: true, cut: body !== '' }
}

/** `budgetOutput`, or undefined when `maxBytes` cannot hold its marker. */
function tryBudget(body: string, maxBytes: number, options: BudgetOptions): ReturnType<typeof budgetOutput> | undefined {
  if (maxBytes < 0) return undefined
  try {
    return budgetOutput(body, maxBytes, options)
  } catch (error) {
    if (error instanceof RangeError) return undefined
    throw error
  }
}

function join(body: string, lines: string[]): string {
  return body === '' ? lines.join('\n') : [body, ...lines].join('\n')
}

/**
 * `running`, `exited code=3`, `exited signal=SIGHUP`; a code above 128 names the signal it
 * stands for by the shell's convention (`exited code=129 (128+SIGHUP)`, bash(1) EXIT STATUS).
 */
export function statusText(status: SessionStatus): string {
  if (status.state === 'running') return 'running'
  if (status.signal) return `exited signal=${status.signal}`
  const code = status.exitCode
  const signal = code === null || code === undefined ? undefined : SIGNAL_NAMES.get(code - 128)
  return `exited code=${code ?? 'unknown'}${signal === undefined ? '' : ` (128+${signal})`}`
}

/** A stopped job's line: it is still there, and bash's `fg` is the way back to it. */
function stoppedLine(job: StoppedJob | undefined): MetaLine[] {
  if (job === undefined) return []
  const program = displayName(job.program)
  return [{ text: `[note: ${program} is stopped (${job.signal}), not ended; the shell keeps it as a job: send "fg" to resume it]`, short: `[note: ${program} stopped; fg resumes it]` }]
}

/** `[session: exited …]` when the shell ended; a running session is the default and goes unsaid. */
function endedLine(status: SessionStatus): MetaLine[] {
  return status.state === 'running' ? [] : [{ text: `[session: ${statusText(status)}]` }]
}

const SIGNAL_NAMES = new Map(Object.entries(constants.signals).map(([name, number]) => [number, name]))

const INPUT_LINES: Record<Exclude<InputState, 'prompt'>, MetaLine> = {
  continuation: {
    text: '[input: continuation — the terminal is waiting for the rest of a block or quoted line; send the rest (often an empty line) to finish it, or SIGINT to abandon it]',
    short: '[input: continuation]',
  },
  not_reading: {
    text: '[input: not_reading — the foreground program was not reading the terminal; the text is typed ahead and may run when that program ends]',
    short: '[input: not_reading]',
  },
  hidden: {
    text: '[input: hidden — the program is reading a secret]',
    short: '[input: hidden]',
  },
}

/**
 * The input state's line. Input typed ahead of a command the backend named (`earlier`) says
 * which, and whether the shell read it once that ended or it waits for that still. Settled at a
 * read (`stdin_read`) with no end seen (a REPL prints no prompt marker), the program was busy and
 * is reading again: a reader blocked in read(2) has nothing queued, so the input was read since.
 */
function inputLine(state: InputState | undefined, earlier: SendResult['earlier'], waitReason: WaitReason): MetaLine[] {
  switch (state) {
    case undefined:
    case 'prompt':
      return []
    case 'not_reading': {
      if (earlier === undefined) return [INPUT_LINES[state]]
      const program = displayName(earlier.program)
      const text =
        earlier.exitStatus !== undefined ? `typed ahead while ${program} ran` : waitReason === 'stdin_read' ? `typed ahead while ${program} was busy; read since` : `typed ahead while ${program} runs; whatever reads the terminal next gets it`
      return [{ text: `[input: not_reading — ${text}]`, short: '[input: not_reading]' }]
    }
    case 'continuation':
    case 'hidden':
      return [INPUT_LINES[state]]
    default:
      return unreachable(state, 'input state')
  }
}

/** What the model can do next after a send that did not settle at a read; `running`: the program the backend saw in front, not reading. */
function noteLine(waitReason: WaitReason, running: string | undefined): MetaLine[] {
  const still = running === undefined ? undefined : `[note: still running: ${displayName(running)}, not reading the terminal`
  switch (waitReason) {
    case 'inferred_idle':
      if (still !== undefined) return [{ text: `${still}; to keep waiting send {"text":"","submit":false,"idleMs":N}; terminal_signal SIGINT interrupts it]`, short: `${still}]` }]
      return [{ text: '[note: output went quiet, which does not prove the command finished; to keep waiting send {"text":"","submit":false,"idleMs":N}; terminal_signal SIGINT interrupts it]', short: '' }]
    case 'timeout':
      return [{ text: `[note: the command is still running${running === undefined ? '' : ` (${displayName(running)})`}; terminal_read shows later output, terminal_signal SIGINT interrupts it; send with a larger timeoutMs or run_in_background to wait longer]`, short: '' }]
    case 'stdin_read':
    case 'session_exit':
      return []
    default:
      return unreachable(waitReason, 'wait reason')
  }
}

/**
 * Why the terminal is ready and how the send came out: `{exit}` alone when a command ended at the
 * shell prompt (`stdin_read` goes unsaid); `{wait, stopped}` for a stopped job (the kernel's word,
 * not the 128+N status alone); else `{wait}`, with `exit` when known — 0 too, since a missing
 * field would mean both "succeeded" and "unknown".
 */
export function readyFields(result: Pick<SendResult, 'waitReason' | 'exitStatus' | 'stopped'>): { wait?: WaitReason; exit?: string; stopped?: string } {
  if (result.stopped !== undefined) return { wait: result.waitReason, stopped: result.stopped.signal }
  const exit = result.exitStatus === undefined ? {} : { exit: String(result.exitStatus) }
  return result.waitReason === 'stdin_read' && result.exitStatus !== undefined ? exit : { wait: result.waitReason, ...exit }
}

/** `readyFields` as a line (`[exit: 0]`, `[wait: stdin_read, stopped: SIGTSTP]`); none for a signal sent while a send was active (that send's result says it). */
function readyLine(result: Pick<SignalResult, 'waitReason' | 'exitStatus' | 'stopped'>): MetaLine[] {
  const { waitReason } = result
  if (waitReason === undefined) return []
  return [{ text: `[${Object.entries(readyFields({ ...result, waitReason })).map(([key, value]) => `${key}: ${value}`).join(', ')}]` }]
}

/**
 * How the model pages what a cut send left out: the lines before the kept tail, counted back from
 * the newest. Lines older than the `retained` newest are gone, and the hint says so rather than
 * offer a page that no longer exists.
 */
export function pageHint(range: { lines: number; tailLines: number }, retained?: number): string {
  const pageable = retained === undefined ? range.lines : Math.max(0, Math.min(range.lines, retained - range.tailLines))
  if (pageable === range.lines) return `terminal_read {offset: ${range.tailLines}, count: ${range.lines}} pages them`
  const gone = `${(range.lines - pageable).toLocaleString('en-US')} ${pageable === 0 ? 'are' : 'before those are'} no longer kept`
  return pageable === 0 ? gone : `terminal_read {offset: ${range.tailLines}, count: ${pageable}} pages the last ${pageable.toLocaleString('en-US')}; the ${gone}`
}

/**
 * The words of a name that did not resolve or a network not reached: glibc's (gai_strerror(3),
 * as Python and most C programs print them), curl's and git's, Node's getaddrinfo codes, Go's
 * resolver, and ENETUNREACH.
 */
const OFFLINE_FAILURE = /Could not resolve host|Temporary failure in name resolution|Name or service not known|No address associated with hostname|getaddrinfo (?:ENOTFOUND|EAI_AGAIN)|unable to resolve host|: no such host\b|Network is unreachable/

/** How a send ran, beyond its result: what the turn and the agent's network did meanwhile. */
export interface SendContext {
  /** The turn was cancelled, so SIGINT was sent to the foreground. */
  interrupted?: boolean
  /** Hosts the agent's allowlist refused while the send ran. */
  refused?: readonly string[]
  /** How many of the newest lines the scrollback keeps (`pageHint`). */
  retained?: number | undefined
  /** The agent's network is `none`: a failed name lookup in the output is the policy's doing. */
  networkNone?: boolean
  /** The screen the model was last shown whole for this session (`screenChanges`). */
  shown?: string | undefined
  /** The shell this send opened (`sessionId`) because the agent's shell (`replaced`) had exited. */
  opened?: { sessionId: string; replaced: string }
}

/**
 * A settled foreground send, with a line for a cancelled turn, for each host the agent's network
 * refused meanwhile, and for a failed name lookup under network `none`.
 */
export function renderSend(result: SendResult, maxBytes: number, context: SendContext = {}): { text: string; truncated: boolean; shown?: string } {
  const { interrupted = false, refused = [], retained, networkNone = false, shown, opened } = context
  const earlier = withEarlier(result.viewport, result.earlier)
  const ready = readyFields(result)
  const meta: MetaLine[] = [
    ...readyLine(result),
    ...(opened === undefined ? [] : [{ text: `[opened: ${opened.sessionId}; your shell ${opened.replaced} had exited]`, short: `[opened: ${opened.sessionId}]` }]),
    ...stoppedLine(result.stopped),
    ...endedLine(result.sessionStatus),
    ...inputLine(result.inputState, result.earlier, result.waitReason),
    ...earlier.meta,
    ...refused.map((host) => ({ text: `[network: blocked ${displayName(host, 256)} — not in the allowlist]`, short: '[network: blocked]' })),
    ...(networkNone && OFFLINE_FAILURE.test(result.viewport) ? [{ text: '[network: none — this sandbox has no network beyond loopback, so no host name resolves]', short: '[network: none]' }] : []),
  ]
  const noticeAt = meta.length
  meta.push(...noteLine(result.waitReason, result.running))
  if (interrupted) meta.push({ text: '[interrupted: the turn was cancelled, so SIGINT was sent to the foreground]', short: '[interrupted]' })
  const screen = parseScreenHeader(result.viewport) !== undefined
  const tailShare = tailShareOf(result.exitStatus)
  const atPrompt = ready.wait === undefined && !screen
  const { body, page } = promptless(earlier.body, atPrompt, retained)
  const options = { body, empty: atPrompt ? '' : NO_OUTPUT, meta, noticeAt, truncated: result.truncated, maxBytes, screen, tailShare, page, ...(result.omitted && { omitted: result.omitted }) }
  // A whole screen is remembered (`shown`); one like the screen shown before it says only what changed.
  const whole = screen && !result.truncated && options.body === result.viewport
  const changes = whole && shown !== undefined ? screenChanges(result.viewport, shown) : undefined
  if (changes !== undefined) {
    const rendered = fit({ ...options, body: changes })
    if (!rendered.truncated) return { text: rendered.text, truncated: false, shown: result.viewport }
  }
  const rendered = fit(options)
  return { text: rendered.text, truncated: rendered.truncated, ...(whole && !rendered.truncated && { shown: result.viewport }) }
}

/**
 * `[earlier command ended, exit: N]`: the command the input was typed ahead of ended during the
 * send (or the signal's wait). Placed in the output after that command's late output (`body`);
 * among the metadata (`meta`) where the backend could not place it (a cut output, a screen).
 */
function withEarlier(output: string, earlier: SendResult['earlier']): { body: string; meta: MetaLine[] } {
  if (earlier?.exitStatus === undefined) return { body: output, meta: [] }
  const line = `[earlier command ended, exit: ${earlier.exitStatus}]`
  if (earlier.lines === undefined) return { body: output, meta: [{ text: line }] }
  if (output === '') return { body: line, meta: [] }
  const lines = output.split('\n')
  lines.splice(earlier.lines, 0, line)
  return { body: lines.join('\n'), meta: [] }
}

/**
 * A background send that was handed to a task, in one line: the task, and its terminal when conch
 * chose it (`openedIn`: a send without a sessionId). The model gave the rest (the terminal, the
 * command, notifyOn), and the send's description says how it is notified.
 */
export function renderBackground(taskId: string, openedIn: string | undefined, maxBytes: number): string {
  const where = openedIn === undefined ? '' : ` in ${openedIn}`
  return fit({ body: '', meta: [{ text: `[task: ${taskId} started${where}]`, short: `[task: ${taskId}]` }], noticeAt: 1, truncated: false, maxBytes }).text
}

/**
 * An opened terminal: its id, and the directory it started in unless that is `workspaceRoot` (the
 * workspace the system prompt names); the type and name the call gave are not repeated.
 */
export function renderOpen(opened: SpawnResult, maxBytes: number, workspaceRoot?: string): string {
  const cwd = opened.cwd === undefined || opened.cwd === workspaceRoot ? '' : `, cwd ${displayName(opened.cwd, 1024)}`
  const head = [{ text: `[opened: ${opened.sessionId}${cwd}]`, short: `[opened: ${opened.sessionId}]` }, ...endedLine(opened.status)]
  return fit({
    body: opened.motd,
    meta: [...head, ...(opened.exposed ?? []).map(({ port, hostPort }) => ({ text: `[exposed: sandbox 127.0.0.1:${port} → host 127.0.0.1:${hostPort}]` }))],
    noticeAt: head.length,
    truncated: false,
    maxBytes,
  }).text
}

/** A screen (`[screen: …]` header, then rows), cut as `fit` cuts one when it must be. */
export function renderScreen(screen: string, maxBytes: number): { text: string; truncated: boolean } {
  if (utf8Bytes(screen) <= maxBytes) return { text: screen, truncated: false }
  const budget = Math.max(0, maxBytes - utf8Bytes(TRUNCATED) - 1)
  const kept = boundScreenText(screen, budget) ?? boundUtf8(screen, budget, { keep: 'head' })
  return { text: `${kept.text}\n${TRUNCATED}`, truncated: true }
}

/**
 * `screen` (a rendered screen) with each run of at least three rows equal to those of `shown` —
 * the screen the model was last shown whole — as one `[rows a-b unchanged]` line; the header and
 * the cursor row are always kept, and a row that became empty is an empty line. Undefined when
 * the two differ in size or buffer (alternate, normal), or either is not a screen.
 */
export function screenChanges(screen: string, shown: string): string | undefined {
  const header = parseScreenHeader(screen)
  const before = parseScreenHeader(shown)
  if (header === undefined || before === undefined || header.buffer !== before.buffer || header.rows !== before.rows || header.cols !== before.cols) return undefined
  const [head, ...rows] = screen.split('\n')
  const old = shown.split('\n').slice(1)
  const out = [head!]
  let first = 1
  /** Ends the run of equal rows `first`…`row - 1`: one line for three or more, else the rows. */
  const close = (row: number) => {
    if (row - first >= MIN_UNCHANGED_RUN) out.push(`[rows ${first}-${row - 1} unchanged]`)
    else for (let at = first; at < row; at++) out.push(rows[at - 1] ?? '')
  }
  const count = Math.max(rows.length, old.length)
  for (let row = 1; row <= count; row++) {
    const text = rows[row - 1] ?? ''
    if (text === (old[row - 1] ?? '') && row !== header.cursorRow) continue
    close(row)
    out.push(text)
    first = row + 1
  }
  close(count + 1)
  return out.join('\n')
}

/** The fewest equal rows a screen says are unchanged rather than shows (fewer cost about as much as the line). */
const MIN_UNCHANGED_RUN = 3

/**
 * A scrollback page. When it must be cut, whole lines go from the oldest side (a single newest
 * line too long for the bound keeps its tail), and every omission is counted: lines left out,
 * bytes cut from a line's head, and which lines of the range `asked` (terminal_read's offset and
 * count) are no longer retained. `lineBegin` is the first line the text shows.
 */
export function renderRead(page: ReadPage, maxBytes: number, asked?: { offset: number; count: number }): { text: string; truncated: boolean; lineBegin: number } {
  // A binary line is summarised on its own, so every line keeps its number.
  const lines = page.text === '' ? [] : page.text.split('\n').map(summariseBinary)
  const dropped = asked === undefined ? undefined : droppedOfAsked(page, asked)
  // The first line asked for that is retained in the run the page comes from.
  const askedFirst = asked === undefined ? undefined : Math.max(page.firstRetainedLine, page.totalLines - asked.offset - asked.count + 1)
  const meta = (lineBegin: number, left?: number, headCut = page.cut) => {
    const out: string[] = [lineBegin <= page.lineEnd ? `[lines: ${lineBegin}-${page.lineEnd} of ${page.totalLines}]` : `[lines: none of ${page.totalLines}]`]
    const counted: string[] = []
    // Retained lines asked for that the byte bounds left out (the backend's and this one's):
    // counted, with the offset that pages them.
    const older = lineBegin > page.lineEnd ? 0 : askedFirst === undefined ? (left ?? 0) : lineBegin - askedFirst
    const leftNote = older > 0 && (page.truncated || left !== undefined)
    if (leftNote) counted.push(`[… ${plural(older, 'older line')} left out to fit the byte bound: terminal_read offset=${page.totalLines - lineBegin + 1} shows ${older === 1 ? 'it' : 'them'}]`)
    if (headCut !== undefined && headCut.line >= lineBegin) counted.push(`[… line ${headCut.line}: its first ${headCut.bytes} bytes omitted]`)
    // Lines asked for that are gone are named. Otherwise a page that reaches back to the dropped
    // lines (its first line is the oldest of its run, or it asked for lines before that) names
    // them: the gap before the newest lines, with how to read the flood's first lines before it,
    // or all before the oldest retained line; a page that does not gets `[older: …]` instead.
    const gap = page.gap !== undefined && page.firstRetainedLine > page.gap.last ? page.gap : undefined
    const reaches = lineBegin === page.firstRetainedLine || (asked !== undefined && page.totalLines - asked.offset - asked.count < page.firstRetainedLine)
    if (dropped !== undefined) {
      counted.push(dropped)
    } else if (reaches && gap !== undefined) {
      out.push(`[dropped: lines ${gap.first}-${gap.last} are no longer retained; terminal_read with offset=${page.totalLines - gap.first + 1} shows the lines before them]`)
    } else if (reaches && page.firstRetainedLine > 1) out.push(`[dropped: lines before ${page.firstRetainedLine} are no longer retained]`)
    // A cut nothing here accounts for (a line cut when it was retained) keeps the plain marker.
    if (page.truncated && counted.length === 0 && (gap === undefined || dropped === undefined)) out.splice(1, 0, TRUNCATED)
    out.splice(1, 0, ...counted)
    if (!leftNote && lineBegin > page.firstRetainedLine && lineBegin <= page.lineEnd) {
      out.push(`[older: terminal_read with offset=${page.totalLines - lineBegin + 1} shows the lines before ${lineBegin}]`)
    }
    return out.join('\n')
  }
  const whole = `${page.text === '' ? '(no lines)' : lines.join('\n')}\n${meta(page.lineBegin)}`
  if (utf8Bytes(whole) <= maxBytes) return { text: whole, truncated: page.truncated, lineBegin: page.lineBegin }

  // Keep the newest lines that fit together with their metadata.
  const leftOut = (count: number) => lines.length - count
  let kept = 0
  let bodyBytes = -1
  for (let count = 1; count <= lines.length; count++) {
    const next = bodyBytes + 1 + utf8Bytes(lines[lines.length - count]!)
    if (next + 1 + utf8Bytes(meta(page.lineEnd - count + 1, leftOut(count))) > maxBytes) break
    kept = count
    bodyBytes = next
  }
  if (kept > 0) {
    const lineBegin = page.lineEnd - kept + 1
    return { text: `${lines.slice(-kept).join('\n')}\n${meta(lineBegin, leftOut(kept))}`, truncated: true, lineBegin }
  }
  // Not even the newest line fits whole: keep its tail, counting the bytes of its head left out
  // (the page's own cut of it included), or, under a tiny bound, just the metadata.
  const newest = lines.at(-1) ?? ''
  const before = page.cut?.line === page.lineEnd ? page.cut.bytes : 0
  const left = leftOut(1)
  // Sized with every byte of the line counted as cut, so the real note is no longer.
  const room = maxBytes - utf8Bytes(meta(page.lineEnd, left, { line: page.lineEnd, bytes: before + utf8Bytes(newest) })) - 1
  const tail = boundUtf8(newest, Math.max(0, room), { keep: 'tail' })
  const text = `${tail.text}\n${meta(page.lineEnd, left, { line: page.lineEnd, bytes: before + tail.omittedBytes })}`
  return { text: room > 0 ? text : boundUtf8(meta(page.lineEnd, left), maxBytes, { keep: 'head' }).text, truncated: true, lineBegin: page.lineEnd }
}

/**
 * `[dropped: …]` for the lines asked for that are no longer retained, with those that are;
 * undefined when none was, and for a page of the newest lines after a gap (its note names it).
 */
function droppedOfAsked(page: ReadPage, asked: { offset: number; count: number }): string | undefined {
  const last = page.totalLines - asked.offset
  const first = Math.max(1, last - asked.count + 1)
  const gap = page.gap
  if (last < 1 || asked.count === 0 || (gap !== undefined && page.firstRetainedLine > gap.last)) return undefined
  const gone: Array<[number, number]> = []
  const add = (from: number, to: number) => {
    const a = Math.max(from, first)
    const b = Math.min(to, last)
    if (a <= b) gone.push([a, b])
  }
  add(1, page.firstRetainedLine - 1)
  if (gap !== undefined) add(gap.first, gap.last)
  if (gone.length === 0) return undefined
  const range = ([a, b]: [number, number]) => (a === b ? `${a}` : `${a}-${b}`)
  const retained = gap === undefined ? `${page.firstRetainedLine}-${page.totalLines}` : `${page.firstRetainedLine}-${gap.first - 1} and ${gap.last + 1}-${page.totalLines}`
  const count = gone.reduce((sum, [a, b]) => sum + b - a + 1, 0)
  return `[dropped: ${plural(count, 'line')} asked for (${gone.map(range).join(', ')}) no longer retained; retained: ${retained}]`
}

function plural(count: number, noun: string): string {
  return `${count.toLocaleString('en-US')} ${noun}${count === 1 ? '' : 's'}`
}

/**
 * A line result's body at the shell's prompt (`[exit: N]`, which says it already) without the
 * prompt row (`beforePrompt`), and its page hint, which still counts that row: it is the
 * scrollback's newest line. Elsewhere (a screen, another wait) both are as they were.
 */
function promptless(body: string, atPrompt: boolean, retained?: number): { body: string; page: (range: { lines: number; tailLines: number }) => string } {
  const promptRow = atPrompt && (body === CONTROLLED_PS1 || body.endsWith(`\n${CONTROLLED_PS1}`)) ? 1 : 0
  return { body: atPrompt ? beforePrompt(body) : body, page: (range) => pageHint({ ...range, tailLines: range.tailLines + promptRow }, retained) }
}

/**
 * A signal, then why the terminal is ready after it as a send says it (`[exit: 130]`), a note when
 * it stopped a job, `[session: exited …]` when it ended the shell, and the end of a command input
 * was typed ahead of as a send marks it (`withEarlier`).
 */
export function renderSignal(sessionId: string, result: SignalResult, maxBytes: number): string {
  const verb = result.delivered ? 'delivered to' : 'not delivered to'
  const ended = result.sessionStatus === undefined ? [] : endedLine(result.sessionStatus)
  const output = result.output ?? ''
  const { waitReason } = result
  const atPrompt = waitReason !== undefined && readyFields({ ...result, waitReason }).wait === undefined && parseScreenHeader(output) === undefined
  const earlier = withEarlier(output, result.earlier)
  const { body, page } = promptless(earlier.body, atPrompt)
  return fit({
    body,
    meta: [{ text: `[signal: ${result.signal} ${verb} ${displayName(result.target)} in ${sessionId}]`, short: `[signal: ${result.signal} ${result.delivered ? 'delivered' : 'not delivered'}]` }, ...readyLine(result), ...stoppedLine(result.stopped), ...ended, ...earlier.meta],
    noticeAt: 1,
    truncated: result.outputTruncated === true,
    maxBytes,
    page,
    ...(result.outputOmitted !== undefined && { omitted: result.outputOmitted }),
  }).text
}

export function renderClose(sessionId: string, result: CloseResult, maxBytes: number): string {
  const stopped = result.stopped.length === 0 ? 'no processes were left' : `stopped ${processNames(result.stopped)}`
  return fit({
    body: '',
    meta: [{ text: `[closed: ${sessionId} — ${stopped}]`, short: `[closed: ${sessionId}]` }, { text: `[session: ${statusText(result.status)}]` }],
    noticeAt: 2,
    truncated: false,
    maxBytes,
  }).text
}

/** One line per session: `pty-1 shell running name=build busy`. */
export function renderList(sessions: SessionInfo[], maxBytes: number, secrets: readonly string[] = []): string {
  // The deployment's secrets, by name only (terminal_send {secret}).
  const secretLine: MetaLine[] = secrets.length === 0 ? [] : [{ text: `[secrets: ${secrets.join(', ')} — terminal_send with secret: NAME types one]`, short: `[secrets: ${secrets.join(', ')}]` }]
  if (sessions.length === 0) return fit({ body: '', meta: [{ text: '(no terminals; terminal_open starts one)', short: '(no terminals)' }, ...secretLine], noticeAt: 1, truncated: false, maxBytes }).text
  const lines = sessions.map((session) => {
    const parts = [session.sessionId, session.type, statusText(session.status)]
    if (session.name !== undefined) parts.push(`name=${session.name}`)
    if (session.busy) parts.push('busy')
    return parts.join(' ')
  })
  // Keep the newest sessions when the list must be cut.
  return fit({ body: lines.join('\n'), meta: secretLine, noticeAt: 0, truncated: false, maxBytes }).text
}

/** What to do next, per error code; the message already names the session. */
const HINTS: Partial<Record<PtyError['code'], string>> = {
  NO_SESSION: 'terminal_list shows your terminals; terminal_open starts a new one',
  FOREIGN_SESSION: 'use a terminal you opened (terminal_list), or open one with terminal_open',
  NO_BACKEND: 'call terminal_open with one of the registered types',
  SIGNAL_REFUSED: 'terminal_close ends the session and everything in it',
  NO_FOREGROUND: 'terminal_read shows the terminal; try again, or terminal_close it',
  SPAWN_FAILED: 'check the type and cwd, then try again',
  SEND_CANCELLED: 'send it again when ready',
  UNKNOWN_KEY: 'fix the key names and send again',
  LINE_TOO_LONG: 'nothing reached the program; it is still waiting for its line',
  UNKNOWN_SECRET: 'terminal_list shows the configured secrets',
  TOO_MANY_SESSIONS: 'terminal_list shows them; terminal_close the ones you no longer need',
}

/** The hint of a terminal that cannot be confined on this machine at all: no call of the model's changes that. */
const NO_SANDBOX_HINT = 'not retryable: nothing can confine a terminal on this machine; tell the user what the message says to install or fix'

/** An error result: `CODE: message — hint`, within the bound. */
export function renderError(error: PtyError, maxBytes: number): string {
  const hint = causedBy(error, 'SANDBOX_UNAVAILABLE') ? NO_SANDBOX_HINT : HINTS[error.code]
  const text = `${error.code}: ${error.message}${hint ? ` — ${hint}` : ''}`
  return boundUtf8(text, maxBytes, { keep: 'head' }).text
}

/** Whether `error` or an error in its `cause` chain has `code`. */
function causedBy(error: unknown, code: string): boolean {
  for (let depth = 0; error instanceof Error && depth < 8; depth++, error = error.cause) {
    if ((error as { code?: unknown }).code === code) return true
  }
  return false
}
