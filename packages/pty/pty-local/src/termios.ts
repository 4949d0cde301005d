/**
 * The terminal's line discipline settings (termios(3) `ICANON`, `ECHO`) and input queue, read
 * through the slave's path. Node has no ioctl(2): one small `perl` helper per backend answers
 * (README). Asked only when a decision needs them.
 */
import { spawn, type ChildProcess } from 'node:child_process'
import { resolveExecutable, systemFolders } from '@conch/subprocess'

/** The local-mode flags conch decides on (termios(3), `c_lflag`). */
export interface TermiosFlags {
  /** `ICANON`: input is assembled into lines by the kernel (at most `CANONICAL_LINE_MAX` bytes each). */
  canonical: boolean
  /** `ECHO`: the terminal echoes input characters. */
  echo: boolean
  /**
   * Bytes waiting in the input queue (FIONREAD, tty_ioctl(4)) once all written before reached it
   * (see `HELPER`); canonical mode counts complete lines only (n_tty's `inq_canon`). Absent: unreadable.
   */
  queued?: number
}

/** Reads a terminal's flags. Undefined when they cannot be read (the terminal is gone, no helper). */
export interface TermiosReader {
  read(path: string): Promise<TermiosFlags | undefined>
  /** Stops the helper; later reads start a new one. */
  close(): void
}

/**
 * The longest line, in bytes, a canonical-mode reader receives whole: termios(3), "Canonical and
 * noncanonical mode" (N_TTY_BUF_SIZE, drivers/tty/n_tty.c; POSIX `MAX_CANON` is only a minimum).
 */
export const CANONICAL_LINE_MAX = 4095

/** The longest line of `data` over `limit` UTF-8 bytes (lines end at CR or LF) and its 1-based number. */
export function overlongLine(data: string, limit = CANONICAL_LINE_MAX): { line: number; bytes: number } | undefined {
  if (data.length * 3 <= limit) return undefined
  let longest: { line: number; bytes: number } | undefined
  const lines = data.split(/\r\n|\r|\n/)
  for (let index = 0; index < lines.length; index++) {
    const piece = lines[index]!
    if (piece.length <= limit / 3) continue
    const bytes = Buffer.byteLength(piece, 'utf8')
    if (bytes > limit && (longest === undefined || bytes > longest.bytes)) longest = { line: index + 1, bytes }
  }
  return longest
}

/**
 * Whether the reader waits for a secret: echo off in canonical mode, as getpass(3), `read -s` and
 * readpassphrase(3) set. A raw-mode program clears `ECHO` too but echoes itself.
 */
export function isHiddenInput(flags: TermiosFlags | undefined): boolean {
  return flags !== undefined && flags.canonical && !flags.echo
}

/**
 * The helper's program: one terminal path per line in, `ok <icanon> <echo> <queued>` or
 * `err <errno>` per line out (`queued` -1 when FIONREAD fails). FIONREAD is 0x541B on Linux
 * (asm-generic/ioctls.h) and 0x4004667F on macOS (sys/filio.h).
 *
 * Before FIONREAD it polls with a zero timeout (select(2)): a write to the master reaches the read
 * queue FIONREAD counts only later, from the flip buffer on a kernel worker (drivers/tty/pty.c),
 * and n_tty's poll, finding no input, waits for that work (`tty_buffer_flush_work`). So a 0 after
 * the poll is exact for everything written before the query.
 */
const HELPER = String.raw`
use POSIX ();
$| = 1;
my $t = POSIX::Termios->new;
my $fionread = $^O eq 'darwin' ? 0x4004667F : 0x541B;
while (my $p = <STDIN>) {
  chomp $p;
  if (sysopen(my $fh, $p, POSIX::O_RDONLY() | POSIX::O_NOCTTY() | POSIX::O_NONBLOCK())) {
    if (defined $t->getattr(fileno($fh))) {
      my $l = $t->getlflag();
      my $r = ''; vec($r, fileno($fh), 1) = 1;
      select($r, undef, undef, 0);
      my $n = pack("i", 0);
      my $q = ioctl($fh, $fionread, $n) ? unpack("i", $n) : -1;
      print "ok ", (($l & POSIX::ICANON()) ? 1 : 0), " ", (($l & POSIX::ECHO()) ? 1 : 0), " ", $q, "\n";
    } else { print "err ", ($! + 0), "\n"; }
    close $fh;
  } else { print "err ", ($! + 0), "\n"; }
}
`

/** Parses one reply line of the helper. */
export function parseTermiosReply(line: string): TermiosFlags | undefined {
  const match = /^ok ([01]) ([01])(?: (-?\d+))?$/.exec(line)
  if (match === null) return undefined
  const flags: TermiosFlags = { canonical: match[1] === '1', echo: match[2] === '1' }
  if (match[3] !== undefined && Number(match[3]) >= 0) flags.queued = Number(match[3])
  return flags
}

export interface HelperTermiosOptions {
  /** The perl executable. Default `perl` from PATH's system folders (`SYSTEM_FOLDERS` of @conch/subprocess): it runs unconfined. */
  perl?: string
  /** A query not answered within this many ms reads as unknown (and restarts the helper). Default 2000. */
  timeoutMs?: number
  /** Starts the helper; injectable for tests. */
  spawnHelper?: (perl: string, script: string) => ChildProcess
}

/**
 * A `TermiosReader` backed by one long-lived perl helper (see the module comment). The helper
 * holds no reference on the event loop (it is unref'd) and is killed by `close()`. A failed or
 * dead helper makes every read answer undefined and is replaced on the next read.
 */
export function helperTermiosReader(options: HelperTermiosOptions = {}): TermiosReader {
  const perl = options.perl ?? resolveExecutable('perl', systemFolders(process.env['PATH'] ?? '')) ?? '/usr/bin/perl'
  const timeoutMs = options.timeoutMs ?? 2000
  const start = options.spawnHelper ?? ((program: string, script: string) => spawn(program, ['-e', script], { stdio: ['pipe', 'pipe', 'ignore'] }))
  let child: ChildProcess | undefined
  let pending: { resolve: (flags: TermiosFlags | undefined) => void; timer: NodeJS.Timeout }[] = []
  let buffered = ''

  const stop = () => {
    const current = child
    child = undefined
    buffered = ''
    if (current !== undefined) {
      current.stdin?.destroy()
      current.stdout?.destroy()
      if (current.exitCode === null && current.signalCode === null) current.kill('SIGKILL')
    }
    for (const waiter of pending.splice(0)) {
      clearTimeout(waiter.timer)
      waiter.resolve(undefined)
    }
  }
  const ensure = (): ChildProcess | undefined => {
    if (child !== undefined) return child
    let started: ChildProcess
    try {
      started = start(perl, HELPER)
    } catch {
      return undefined
    }
    child = started
    const ended = () => {
      if (child === started) stop()
    }
    started.on('error', ended).on('exit', ended)
    started.stdin?.on('error', () => {})
    started.stdout?.setEncoding('utf8')
    started.stdout?.on('data', (data: string) => {
      if (child !== started) return
      buffered += data
      for (let end = buffered.indexOf('\n'); end >= 0; end = buffered.indexOf('\n')) {
        const line = buffered.slice(0, end)
        buffered = buffered.slice(end + 1)
        const waiter = pending.shift()
        if (waiter === undefined) continue
        clearTimeout(waiter.timer)
        waiter.resolve(parseTermiosReply(line))
      }
    })
    started.unref()
    ;(started.stdin as unknown as { unref?: () => void } | null)?.unref?.()
    ;(started.stdout as unknown as { unref?: () => void } | null)?.unref?.()
    return started
  }

  return {
    read(path) {
      // One path per line: a path with a line break (or empty) is never sent.
      if (path === '' || /[\r\n\0]/.test(path)) return Promise.resolve(undefined)
      const helper = ensure()
      if (helper?.stdin == null || !helper.stdin.writable) return Promise.resolve(undefined)
      return new Promise((resolve) => {
        const timer = setTimeout(() => {
          // Replies are in order: a lost one would shift every later answer, so start over.
          if (child === helper) stop()
          resolve(undefined)
        }, timeoutMs)
        timer.unref()
        pending.push({ resolve, timer })
        helper.stdin!.write(`${path}\n`)
      })
    },
    close: stop,
  }
}
