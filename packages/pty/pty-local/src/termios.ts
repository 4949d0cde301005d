/**
 * The terminal's line discipline settings, read from the kernel: whether the foreground program
 * reads in canonical mode (termios(3) `c_lflag & ICANON`) and whether the terminal echoes input
 * (`ECHO`). They are a property of the terminal, so reading them through the slave's path sees
 * what the program set. Node has no ioctl(2): one small `perl` helper per backend (its core POSIX
 * module) answers each query (the README says how, and what it costs). Queries are made only when
 * a decision needs them, never on the path of an ordinary send at the shell's prompt.
 */
import { spawn, type ChildProcess } from 'node:child_process'

/** The local-mode flags conch decides on (termios(3), `c_lflag`). */
export interface TermiosFlags {
  /** `ICANON`: input is assembled into lines by the kernel (at most `CANONICAL_LINE_MAX` bytes each). */
  canonical: boolean
  /** `ECHO`: the terminal echoes input characters. */
  echo: boolean
  /**
   * Bytes waiting in the terminal's input queue for a reader (FIONREAD, tty_ioctl(4)), read after
   * every byte written to the master before the query was moved into that queue (see `HELPER`):
   * 0 in raw mode means everything written before was read (or discarded by a flush). In
   * canonical mode only the bytes of complete lines count (n_tty's `inq_canon`), so an
   * unfinished line reads as 0. Absent when it cannot be read.
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
 * The longest line, in bytes, a canonical-mode reader receives whole. termios(3), "Canonical and
 * noncanonical mode": "The maximum line length is 4096 chars (including the terminating newline
 * character); lines longer than 4096 chars are truncated. After 4095 characters, … any input
 * data after 4095 characters up to (but not including) any terminating newline is discarded."
 * (N_TTY_BUF_SIZE in the kernel's drivers/tty/n_tty.c; the POSIX `MAX_CANON` of limits.h, 255, is
 * only the guaranteed minimum.)
 */
export const CANONICAL_LINE_MAX = 4095

/**
 * The longest line of `data` as it will be written (lines end at CR or LF), in UTF-8 bytes, with
 * its 1-based number — or undefined when no line is longer than `limit`. Cheap when the text is
 * short: no line can exceed `limit` bytes when the whole text has at most `limit / 3` UTF-16 units.
 */
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
 * Whether the reader waits for a secret: echo off in canonical mode — what getpass(3) (glibc
 * clears `ECHO` and `ISIG`, keeps `ICANON`), bash's `read -s`, sudo and ssh-keygen's
 * readpassphrase(3) set. A raw-mode program (readline, an editor, a REPL) clears `ICANON` and
 * `ECHO` and echoes itself: that is not hidden input.
 */
export function isHiddenInput(flags: TermiosFlags | undefined): boolean {
  return flags !== undefined && flags.canonical && !flags.echo
}

/**
 * The helper's program: one terminal path per line in, `ok <icanon> <echo> <queued>` or
 * `err <errno>` per line out (`queued` -1 when FIONREAD fails). FIONREAD is 0x541B on Linux
 * (asm-generic/ioctls.h) and 0x4004667F on macOS (sys/filio.h).
 *
 * Before FIONREAD it polls the terminal for input with a zero timeout (select(2)). On Linux a
 * write to the master only appends to the slave's flip buffer and queues `flush_to_ldisc` on a
 * workqueue (pty_write → tty_insert_flip_string_and_push_buffer, drivers/tty/pty.c and
 * tty_buffer.c), which moves the bytes into the line discipline's read queue — the queue
 * FIONREAD counts — later, on a kernel worker thread. So right after a write FIONREAD can read 0
 * for bytes nobody has read yet (measured: 2 of 100 immediate queries on the loaded machine,
 * tests/termios.test.ts). n_tty's poll, finding no input, waits for that pending work
 * (`tty_buffer_flush_work` in n_tty_poll, drivers/tty/n_tty.c) and looks again; with input
 * already in the queue it does not wait, but then FIONREAD is above 0 anyway. Either way a 0
 * after the poll is exact for everything written before the query.
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
  /** The perl executable. Default `perl` from PATH. */
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
  const perl = options.perl ?? 'perl'
  const timeoutMs = options.timeoutMs ?? 2000
  const start = options.spawnHelper ?? ((program: string, script: string) => spawn(program, ['-e', script], { stdio: ['pipe', 'pipe', 'ignore'] }))
  let child: ChildProcess | undefined
  let pending: { resolve: (flags: TermiosFlags | undefined) => void; timer: NodeJS.Timeout }[] = []
  let buffered = ''

  const failAll = () => {
    for (const waiter of pending.splice(0)) {
      clearTimeout(waiter.timer)
      waiter.resolve(undefined)
    }
  }
  const stop = () => {
    const current = child
    child = undefined
    buffered = ''
    if (current !== undefined) {
      current.stdin?.destroy()
      current.stdout?.destroy()
      if (current.exitCode === null && current.signalCode === null) current.kill('SIGKILL')
    }
    failAll()
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
    started.on('error', () => {
      if (child === started) stop()
    })
    started.on('exit', () => {
      if (child === started) stop()
    })
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
