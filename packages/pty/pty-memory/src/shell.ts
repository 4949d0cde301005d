/**
 * The memory shell: a tiny bash look-alike with fixed responses, no processes and no timing.
 * It exists so that every way a send can settle — each `waitReason`, each `inputState`, a cut
 * viewport — can be produced on purpose and pinned byte for byte. Input goes through a line
 * discipline like a terminal in canonical mode (the README's "Line discipline").
 */
import { type ClosedProcess, PtyError, type PtySignal, type SessionStatus } from '@conch/pty'
import { describeExit, unreachable } from '@conch/session'
import { expandWord, lex, type ListItem } from './lex.ts'

/** A program holding the foreground. Process group numbers are fake and only name the program. */
export interface Program {
  kind: 'sleep' | 'yes' | 'cat' | 'hold'
  /** The command line that started it, for job messages. */
  command: string
  pgid: number
  /** What `yes` prints. */
  word?: string
}

/** How the terminal stands once a send's input was taken in. */
export type ShellState =
  | { waitReason: 'stdin_read'; inputState: 'prompt' | 'continuation'; detail: string }
  | { waitReason: 'inferred_idle' | 'timeout'; inputState: 'not_reading'; detail: string }
  | { waitReason: 'session_exit'; detail: string }
  /** `hold` keeps the send open until it is interrupted or the session closes. */
  | { waitReason: 'pending' }

export interface ShellOptions {
  cwd: string
  home: string
  /** `sleep N` with N·1000 below this finishes at once; longer sleeps stay in the foreground. */
  idleSilenceMs: number
  /** Lines `yes` prints each time a send settles on it. */
  yesLines: number
}

/** Where the shell's text goes. `output` is what programs print; `echo` is the terminal echoing typed input and prompts. */
export interface ShellSink {
  output(text: string): void
  echo(text: string): void
  exited(status: SessionStatus): void
}

export const SHELL_PGID = 100
const PS1 = '$ '
const PS2 = '> '
/** Largest output one `seq` or `repeat` may produce, in lines or bytes; keeps a typo from exhausting memory. */
const MAX_GENERATED = 4_000_000

const HELP = [
  'memory shell commands:',
  '  echo [-n] [-e] ARGS   printf FORMAT [ARGS]   pwd   cd [DIR|-]   export [NAME=VALUE]   unset NAME',
  '  env   true   false   exit [N]   help   jobs',
  '  seq [FIRST [STEP]] LAST   repeat COUNT TEXT   sleep SECONDS   yes [WORD]   cat   hold [TEXT]',
].join('\n')

export class MemoryShell {
  private cwd: string
  private readonly env = new Map<string, string>()
  private lastStatus = 0
  private line = ''
  /** Source lines of an unfinished command (open quote or trailing backslash). */
  private pendingSource: string | undefined
  private foreground: Program | undefined
  /** The rest of a command list waiting for the foreground program to end. */
  private rest: { list: ListItem[]; next: number } | undefined
  private readonly typeahead: string[] = []
  private readonly jobs: Program[] = []
  private nextPgid = SHELL_PGID + 1
  private exitStatus: SessionStatus | undefined

  constructor(private readonly options: ShellOptions, private readonly sink: ShellSink) {
    this.cwd = options.cwd
    this.env.set('HOME', options.home)
    this.env.set('PATH', '/usr/local/bin:/usr/bin:/bin')
    this.env.set('PWD', options.cwd)
    this.env.set('USER', 'conch')
  }

  get status(): SessionStatus {
    return this.exitStatus ?? { state: 'running' }
  }

  /** Prints the message of the day (when any) and the first prompt. */
  start(motd: string): void {
    if (motd !== '') this.sink.output(motd.endsWith('\n') ? motd : `${motd}\n`)
    this.sink.echo(PS1)
  }

  /** Keyboard input, through the line discipline. Input after the shell exited is dropped. */
  type(data: string): void {
    for (const char of data) {
      if (this.exitStatus) return
      switch (char) {
        case '\x03':
          this.typedSignal('SIGINT', '^C')
          break
        case '\x1a':
          this.typedSignal('SIGTSTP', '^Z')
          break
        case '\x04':
          this.endOfFile()
          break
        case '\r':
        case '\n':
          this.submit()
          break
        default:
          this.line += char
          this.sink.echo(char)
      }
    }
  }

  /**
   * Where the terminal stands now, for settling a send. Each call on a running `yes` prints
   * another `yesLines` lines (it never stops printing, so a send on it can only time out).
   */
  state(): ShellState {
    if (this.exitStatus) return { waitReason: 'session_exit', detail: `the shell ${describeExit(this.exitStatus)}` }
    const program = this.foreground
    if (!program) {
      if (this.pendingSource !== undefined) {
        return { waitReason: 'stdin_read', inputState: 'continuation', detail: 'memory shell continuation prompt (> )' }
      }
      return { waitReason: 'stdin_read', inputState: 'prompt', detail: 'memory shell prompt' }
    }
    switch (program.kind) {
      case 'cat':
        return { waitReason: 'stdin_read', inputState: 'prompt', detail: 'cat reads the terminal' }
      case 'sleep':
        return { waitReason: 'inferred_idle', inputState: 'not_reading', detail: `${program.command} prints nothing and does not read the terminal` }
      case 'yes': {
        this.sink.output(`${program.word ?? 'y'}\n`.repeat(this.options.yesLines))
        return { waitReason: 'timeout', inputState: 'not_reading', detail: `${program.command} keeps printing and does not read the terminal` }
      }
      case 'hold':
        return { waitReason: 'pending' }
      default:
        return unreachable(program.kind, 'program kind')
    }
  }

  /**
   * Delivers a signal to the foreground process group, as `kill(2)` on the terminal's
   * foreground group would: a program ends (or stops, for SIGTSTP); bash itself ignores
   * SIGTERM and SIGTSTP, drops the current line on SIGINT, exits on SIGHUP.
   * @throws PtyError `SESSION_EXITED` after exit, `SIGNAL_REFUSED` for SIGKILL to the shell.
   */
  signal(signal: PtySignal): { target: string; pgid: number } {
    if (this.exitStatus) throw new PtyError('SESSION_EXITED', { reason: `the memory shell ${describeExit(this.exitStatus)}; no signal was sent` })
    const program = this.foreground
    if (program) {
      this.signalProgram(program, signal)
      return { target: program.kind, pgid: program.pgid }
    }
    switch (signal) {
      case 'SIGKILL':
        throw new PtyError('SIGNAL_REFUSED', { reason: 'SIGKILL would kill the shell itself (it is the foreground process group); close the session instead' })
      case 'SIGINT':
        this.line = ''
        this.pendingSource = undefined
        this.lastStatus = 130
        this.sink.echo(`\n${PS1}`)
        break
      case 'SIGHUP':
        this.exit({ state: 'exited', exitCode: null, signal: 'SIGHUP' })
        break
      case 'SIGTERM':
      case 'SIGTSTP':
        // An interactive bash ignores both (bash(1), SIGNALS).
        break
      default:
        unreachable(signal, 'signal')
    }
    return { target: 'bash', pgid: SHELL_PGID }
  }

  /** Ends the session as closing the terminal would; returns the (fake) processes it stopped. */
  hangup(): ClosedProcess[] {
    if (this.exitStatus) return []
    const stopped: ClosedProcess[] = []
    if (this.foreground) stopped.push({ pid: this.foreground.pgid, name: this.foreground.kind })
    for (const job of this.jobs) stopped.push({ pid: job.pgid, name: job.kind })
    stopped.push({ pid: SHELL_PGID, name: 'bash' })
    this.foreground = undefined
    this.jobs.length = 0
    this.exit({ state: 'exited', exitCode: null, signal: 'SIGHUP' })
    return stopped
  }

  // ─── line discipline ──────────────────────────────────────────────────────────────

  private submit(): void {
    const line = this.line
    this.line = ''
    this.sink.echo('\n')
    const program = this.foreground
    if (program?.kind === 'cat') this.sink.output(`${line}\n`)
    else if (program) this.typeahead.push(line)
    else this.runLine(line)
  }

  /** ^C / ^Z typed: the terminal echoes it, flushes typed-ahead input and signals the foreground (termios(3), ISIG). */
  private typedSignal(signal: 'SIGINT' | 'SIGTSTP', echo: string): void {
    this.sink.echo(echo)
    this.line = ''
    this.typeahead.length = 0
    if (this.foreground || signal === 'SIGINT') this.signal(signal)
  }

  private endOfFile(): void {
    if (this.line !== '') return
    const program = this.foreground
    if (program?.kind === 'cat') {
      this.finishProgram(0)
      return
    }
    if (program) return
    if (this.pendingSource !== undefined) {
      this.sink.output('bash: unexpected EOF while looking for matching quote\n')
      this.pendingSource = undefined
      this.lastStatus = 2
      this.sink.echo(PS1)
      return
    }
    this.sink.output('exit\n')
    this.exit({ state: 'exited', exitCode: this.lastStatus, signal: null })
  }

  // ─── the shell ────────────────────────────────────────────────────────────────────

  private runLine(line: string): void {
    const source = this.pendingSource === undefined ? line : `${this.pendingSource}\n${line}`
    const lexed = lex(source)
    if (!lexed.complete) {
      this.pendingSource = source
      this.sink.echo(PS2)
      return
    }
    this.pendingSource = undefined
    this.runList(lexed.list, 0)
  }

  private runList(list: ListItem[], start: number): void {
    for (let index = start; index < list.length; index++) {
      const item = list[index]!
      if (item.connector === '&&' && this.lastStatus !== 0) continue
      if (item.connector === '||' && this.lastStatus === 0) continue
      this.runCommand(item)
      if (this.exitStatus) return
      if (this.foreground) {
        this.rest = { list, next: index + 1 }
        return
      }
    }
    this.prompt()
  }

  private prompt(): void {
    this.sink.echo(PS1)
    // Input typed ahead while a program ran is read by bash now, in order.
    while (!this.foreground && !this.exitStatus && this.typeahead.length > 0) {
      const line = this.typeahead.shift()!
      this.sink.echo(`${line}\n`)
      this.runLine(line)
    }
  }

  private runCommand(item: ListItem): void {
    if (item.unsupported) {
      this.fail(2, `bash: ${item.unsupported} are not supported by the memory shell`)
      return
    }
    const lookup = (name: string) => (name === '?' ? String(this.lastStatus) : this.env.get(name))
    const words = item.words.map((word) => expandWord(word, lookup))
    while (words.length > 0 && /^[A-Za-z_][A-Za-z0-9_]*=/.test(words[0]!)) {
      const assignment = words.shift()!
      const equals = assignment.indexOf('=')
      this.env.set(assignment.slice(0, equals), assignment.slice(equals + 1))
    }
    this.lastStatus = 0
    const [name, ...args] = words
    if (name === undefined) return
    const command = words.join(' ')
    switch (name) {
      case 'echo':
        return this.echoCommand(args)
      case 'printf':
        if (args.length === 0) return this.fail(2, 'printf: usage: printf format [arguments]')
        return this.sink.output(printf(args[0]!, args.slice(1)))
      case 'pwd':
        return this.sink.output(`${this.cwd}\n`)
      case 'cd':
        return this.cd(args)
      case 'export':
        return this.exportCommand(args)
      case 'unset':
        for (const variable of args) this.env.delete(variable)
        return
      case 'env':
        return this.sink.output([...this.env].sort(([a], [b]) => (a < b ? -1 : 1)).map(([key, value]) => `${key}=${value}\n`).join(''))
      case 'true':
      case ':':
        return
      case 'false':
        this.lastStatus = 1
        return
      case 'help':
        return this.sink.output(`${HELP}\n`)
      case 'jobs':
        return this.sink.output(this.jobs.map((job, index) => `${jobLine(index + 1, job.command)}\n`).join(''))
      case 'exit':
        return this.exitCommand(args)
      case 'seq':
        return this.seq(args)
      case 'repeat':
        return this.repeat(args)
      case 'sleep':
        return this.sleep(args, command)
      case 'yes':
        return this.startProgram({ kind: 'yes', command, pgid: 0, word: args.length > 0 ? args.join(' ') : 'y' })
      case 'cat':
        if (args.length > 0) return this.fail(1, args.map((file) => `cat: ${file}: No such file or directory`).join('\n'))
        return this.startProgram({ kind: 'cat', command, pgid: 0 })
      case 'hold':
        if (args.length > 0) this.sink.output(`${args.join(' ')}\n`)
        return this.startProgram({ kind: 'hold', command, pgid: 0 })
      default:
        return this.fail(127, `bash: ${name}: command not found`)
    }
  }

  private fail(status: number, message: string): void {
    this.sink.output(`${message}\n`)
    this.lastStatus = status
  }

  private echoCommand(args: string[]): void {
    let newline = true
    let escapes = false
    while (args[0] === '-n' || args[0] === '-e' || args[0] === '-ne' || args[0] === '-en') {
      const flag = args.shift()!
      if (flag.includes('n')) newline = false
      if (flag.includes('e')) escapes = true
    }
    const text = args.join(' ')
    this.sink.output((escapes ? unescape(text) : text) + (newline ? '\n' : ''))
  }

  private cd(args: string[]): void {
    if (args.length > 1) return this.fail(1, 'bash: cd: too many arguments')
    let target = args[0] ?? this.env.get('HOME') ?? '/'
    if (target === '-') {
      const previous = this.env.get('OLDPWD')
      if (previous === undefined) return this.fail(1, 'bash: cd: OLDPWD not set')
      target = previous
      this.sink.output(`${previous}\n`)
    }
    const next = resolvePath(this.cwd, target)
    this.env.set('OLDPWD', this.cwd)
    this.env.set('PWD', next)
    this.cwd = next
  }

  private exportCommand(args: string[]): void {
    if (args.length === 0) {
      const lines = [...this.env].sort(([a], [b]) => (a < b ? -1 : 1)).map(([key, value]) => `declare -x ${key}="${value}"\n`)
      return this.sink.output(lines.join(''))
    }
    for (const arg of args) {
      const equals = arg.indexOf('=')
      const name = equals < 0 ? arg : arg.slice(0, equals)
      if (!/^[A-Za-z_][A-Za-z0-9_]*$/.test(name)) {
        this.fail(1, `bash: export: \`${arg}': not a valid identifier`)
        continue
      }
      if (equals >= 0) this.env.set(name, arg.slice(equals + 1))
      else if (!this.env.has(name)) this.env.set(name, '')
    }
  }

  private exitCommand(args: string[]): void {
    this.sink.output('exit\n')
    let code = this.lastStatus
    if (args[0] !== undefined) {
      if (!/^[+-]?\d+$/.test(args[0])) {
        this.sink.output(`bash: exit: ${args[0]}: numeric argument required\n`)
        code = 2
      } else code = ((Number(args[0]) % 256) + 256) % 256
    }
    this.exit({ state: 'exited', exitCode: code, signal: null })
  }

  private seq(args: string[]): void {
    const numbers = args.map(Number)
    if (args.length === 0 || args.length > 3 || numbers.some((value) => !Number.isInteger(value))) {
      return this.fail(1, 'seq: usage: seq [FIRST [STEP]] LAST (integers)')
    }
    const [first, step, last] = args.length === 1 ? [1, 1, numbers[0]!] : args.length === 2 ? [numbers[0]!, 1, numbers[1]!] : [numbers[0]!, numbers[1]!, numbers[2]!]
    if (step === 0) return this.fail(1, "seq: invalid Zero increment value: '0'")
    const count = Math.floor((last - first) / step) + 1
    if (count > MAX_GENERATED) return this.fail(1, `seq: the memory shell prints at most ${MAX_GENERATED} lines`)
    const lines: string[] = []
    for (let value = first; step > 0 ? value <= last : value >= last; value += step) lines.push(`${value}\n`)
    this.sink.output(lines.join(''))
  }

  private repeat(args: string[]): void {
    const count = Number(args[0])
    if (args.length < 2 || !Number.isInteger(count) || count < 0) return this.fail(1, 'repeat: usage: repeat COUNT TEXT')
    const text = args.slice(1).join(' ')
    if (count * Buffer.byteLength(text) > MAX_GENERATED) return this.fail(1, `repeat: the memory shell prints at most ${MAX_GENERATED} bytes at once`)
    this.sink.output(`${text.repeat(count)}\n`)
  }

  private sleep(args: string[], command: string): void {
    const seconds = Number(args[0])
    if (args.length !== 1 || !Number.isFinite(seconds) || seconds < 0) {
      return this.fail(1, `sleep: invalid time interval '${args[0] ?? ''}'`)
    }
    // A sleep shorter than the silence threshold would be over before anyone looked.
    if (seconds * 1000 < this.options.idleSilenceMs) return
    this.startProgram({ kind: 'sleep', command, pgid: 0 })
  }

  private startProgram(program: Program): void {
    this.foreground = { ...program, pgid: this.nextPgid++ }
  }

  /** The foreground program ended by itself: the rest of its command list runs. */
  private finishProgram(status: number): void {
    this.foreground = undefined
    this.lastStatus = status
    const rest = this.rest
    this.rest = undefined
    if (rest) this.runList(rest.list, rest.next)
    else this.prompt()
  }

  private signalProgram(program: Program, signal: PtySignal): void {
    // A list interrupted by a signal is abandoned (bash(1): a child killed by a signal ends the list).
    this.foreground = undefined
    this.rest = undefined
    if (signal === 'SIGTSTP') {
      this.lastStatus = 148
      this.jobs.push(program)
      this.sink.output(`\n${jobLine(this.jobs.length, program.command)}\n`)
    } else {
      const [status, message] = SIGNAL_ENDINGS[signal]
      this.lastStatus = status
      if (message !== '') this.sink.output(message)
    }
    this.prompt()
  }

  private exit(status: SessionStatus): void {
    this.exitStatus = status
    this.foreground = undefined
    this.rest = undefined
    this.typeahead.length = 0
    this.line = ''
    this.pendingSource = undefined
    this.sink.exited(status)
  }
}

/** A program's `$?` (128 + the signal's number) and what bash prints when a signal ends it. */
const SIGNAL_ENDINGS = {
  SIGINT: [130, ''],
  SIGTERM: [143, 'Terminated\n'],
  SIGKILL: [137, 'Killed\n'],
  SIGHUP: [129, 'Hangup\n'],
} as const

function jobLine(number: number, command: string): string {
  return `[${number}]+  ${'Stopped'.padEnd(24)}${command}`
}

/** POSIX path resolution without a filesystem: every directory exists in the memory shell. */
export function resolvePath(cwd: string, target: string): string {
  const parts = (target.startsWith('/') ? target : `${cwd}/${target}`).split('/')
  const out: string[] = []
  for (const part of parts) {
    if (part === '' || part === '.') continue
    if (part === '..') out.pop()
    else out.push(part)
  }
  return `/${out.join('/')}`
}

/** Backslash escapes of `echo -e` and printf formats: `\n`, `\t`, `\\`, `\"`, `\'`. */
function unescape(text: string): string {
  return text.replace(/\\([nt\\"'])/g, (_match, char: string) => (char === 'n' ? '\n' : char === 't' ? '\t' : char))
}

/** printf(1) with `%s`, `%d` and `%%`; the format is reused while arguments remain. */
function printf(format: string, args: string[]): string {
  let out = ''
  let index = 0
  do {
    out += unescape(format).replace(/%([sd%])/g, (_match, spec: string) => {
      if (spec === '%') return '%'
      const arg = args[index++] ?? ''
      return spec === 'd' ? String(Number.parseInt(arg, 10) || 0) : arg
    })
  } while (index < args.length && /%[sd]/.test(format))
  return out
}
