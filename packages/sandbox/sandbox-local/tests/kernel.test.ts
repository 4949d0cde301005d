/**
 * Attacks on the kernel from inside a real bubblewrap sandbox, as root: writing sysctls (the
 * core_pattern escape), changing the host name, making namespaces, mounting, reaching outside
 * with ptrace. Every write tried here writes the value the file already holds, so a regression
 * shows up as a passing write instead of changing the machine the tests run on.
 */
import { mkdtempSync, readFileSync, readdirSync, readlinkSync, realpathSync, rmSync, statSync, writeFileSync } from 'node:fs'
import { hostname, tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest'
import { harness, hasBwrap, quote, readOnly, type Harness } from './harness.ts'

let workspace: string
let box: Harness | undefined

beforeAll(() => {
  workspace = realpathSync(mkdtempSync(join(tmpdir(), 'conch-kernel-ws-')))
})
afterAll(() => rmSync(workspace, { recursive: true, force: true }))
afterEach(async () => {
  const errors = box?.logs.filter((message) => message.type === 'error').map((message) => message.args) ?? []
  await box?.dispose()
  box = undefined
  expect(errors).toEqual([])
})

// The sysctl and host-name attacks are root's (as CI runs); as another user the kernel refuses them anyway.
const isRoot = process.getuid?.() === 0

describe.runIf(hasBwrap).each(['read-only', 'workspace-write'] as const)('under %s, as root', (mode) => {
  it.runIf(isRoot)('refuses the core_pattern write with Read-only file system and leaves the host’s unchanged', async () => {
    box = await harness(workspace)
    const before = readFileSync('/proc/sys/kernel/core_pattern', 'utf8')
    const result = await box.run(`v=$(cat /proc/sys/kernel/core_pattern); printf '%s\\n' "$v" > /proc/sys/kernel/core_pattern && echo WRITTEN`, { mode })
    expect(result.stderr).toMatch(readOnly('/proc/sys/kernel/core_pattern'))
    expect(result.stdout).not.toContain('WRITTEN')
    expect(readFileSync('/proc/sys/kernel/core_pattern', 'utf8')).toBe(before)
  })

  it.runIf(isRoot)('refuses a sysctl write, through sysctl(8) and through /proc/sys', async () => {
    box = await harness(workspace)
    const result = await box.run(
      `sysctl -w vm.swappiness="$(cat /proc/sys/vm/swappiness)"; echo "sysctl=$?"
       cat /proc/sys/vm/swappiness > /proc/sys/vm/swappiness`,
      { mode },
    )
    // procps checks access(2) first: `permission denied on key` (EROFS) before trying the write.
    expect(result.stderr).toMatch(/^sysctl: (permission denied on key "vm\.swappiness"|setting key "vm\.swappiness": Read-only file system)/m)
    expect(result.stdout).toMatch(/^sysctl=(?!0)\d+$/m)
    expect(result.stderr).toMatch(readOnly('/proc/sys/vm/swappiness'))
  })

  it.runIf(isRoot)('refuses a host name change, by hostname(1) and by /proc/sys/kernel/hostname, and has its own UTS namespace', async () => {
    box = await harness(workspace)
    const name = hostname()
    const result = await box.run(
      `hostname ${quote(name)}; echo "hostname=$?"
       printf '%s' "$(hostname)" > /proc/sys/kernel/hostname
       [ "$(readlink /proc/self/ns/uts)" != ${quote(hostUts())} ] && echo own-uts`,
      { mode },
    )
    expect(result.stdout).toMatch(/^hostname=(?!0)\d+$/m)
    expect(result.stderr).toMatch(/^hostname: .+$/m)
    expect(result.stderr).toMatch(readOnly('/proc/sys/kernel/hostname'))
    expect(result.stdout).toContain('own-uts')
    expect(hostname()).toBe(name)
  })

  it('refuses new namespaces: unshare -r and unshare -m fail with Operation not permitted', async () => {
    box = await harness(workspace)
    const result = await box.run(`unshare -r true; echo "user=$?"; unshare -m true; echo "mount=$?"; unshare -n true; echo "net=$?"`, { mode })
    expect(result.stdout).toMatch(/^user=1$/m)
    expect(result.stdout).toMatch(/^mount=1$/m)
    expect(result.stdout).toMatch(/^net=1$/m)
    expect(result.stderr.match(/^unshare: unshare failed: Operation not permitted$/gm)).toHaveLength(3)
  })

  it('refuses mount and umount, whatever the file system', async () => {
    box = await harness(workspace)
    const result = await box.run(`mount -t tmpfs none /mnt; echo "tmpfs=$?"; mount --bind / /mnt; echo "bind=$?"; umount /proc; echo "umount=$?"`, { mode })
    expect(result.stdout).toMatch(/^tmpfs=(?!0)\d+$/m)
    expect(result.stdout).toMatch(/^bind=(?!0)\d+$/m)
    expect(result.stdout).toMatch(/^umount=(?!0)\d+$/m)
    expect(result.stderr).toMatch(/^mount: /m)
  })

  it('runs the shell under the seccomp filter, with the filter’s descriptor closed before the shell starts', async () => {
    box = await harness(workspace)
    const result = await box.run(`grep '^Seccomp:' /proc/self/status; [ -e /proc/self/fd/9 ] && echo fd9-open || echo fd9-closed; ls /proc/self/fd | sort -n | tr '\\n' ' '`, { mode })
    expect(result.stdout).toContain('Seccomp:\t2')
    expect(result.stdout).toContain('fd9-closed')
  })

  it('masks kernel memory, keys, timers and firmware, and keeps /proc/sys and friends read-only', async () => {
    box = await harness(workspace)
    const result = await box.run(
      `for f in /proc/keys /proc/timer_list /proc/kcore /proc/sched_debug; do [ -e $f ] && echo "$f=$(wc -c < $f)"; done
       echo "firmware=$(ls -A /sys/firmware 2>/dev/null | wc -l)"
       grep -E ' /proc/(sys|irq|bus|fs) ' /proc/self/mountinfo | awk '{print $5, $6}'`,
      { mode },
    )
    expect(result.stdout).toMatch(/^\/proc\/keys=0$/m)
    expect(result.stdout).toMatch(/^\/proc\/timer_list=0$/m)
    for (const line of result.stdout.split('\n').filter((l) => l.startsWith('/proc/') && l.includes('='))) expect(line).toMatch(/=0$/)
    expect(result.stdout).toMatch(/^firmware=0$/m)
    for (const path of ['/proc/sys', '/proc/irq', '/proc/bus', '/proc/fs']) expect(result.stdout).toMatch(new RegExp(`^${path} ro,`, 'm'))
  })
})

/** This process's UTS namespace (`uts:[inode]`), to compare with the sandbox's. */
function hostUts(): string {
  return readlinkSync('/proc/self/ns/uts')
}


describe.runIf(hasBwrap)('system calls the filter decides, for real', () => {
  it('denies clone with CLONE_NEWUSER (EPERM) and answers clone3 with ENOSYS, while threads and fork keep working', async () => {
    box = await harness(workspace)
    const script = [
      'import ctypes, os, threading',
      'libc = ctypes.CDLL(None, use_errno=True)',
      'nr = {"x86_64": (56, 435), "aarch64": (220, 435)}[os.uname().machine]',
      'r = libc.syscall(nr[0], 0x10000000 | 17, 0, 0, 0, 0); print("clone-newuser", r, ctypes.get_errno())',
      'r = libc.syscall(nr[1], 0, 0); print("clone3", r, ctypes.get_errno())',
      't = threading.Thread(target=lambda: print("thread-ran")); t.start(); t.join()',
      'pid = os.fork()',
      'if pid == 0: os._exit(7)',
      'print("fork-status", os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]))',
    ].join('\n')
    const result = await box.run(`python3 -c ${quote(script)}`)
    expect(result.stdout).toContain('clone-newuser -1 1\n')
    expect(result.stdout).toContain('clone3 -1 38\n')
    expect(result.stdout).toContain('thread-ran\n')
    expect(result.stdout).toContain('fork-status 7\n')
  })

  it('refuses TIOCSTI on a terminal, even its own controlling one, while other terminal ioctls work', async () => {
    box = await harness(workspace)
    // A new session whose controlling terminal is a pty opened in the sandbox: there TIOCSTI
    // works for anyone the host lets (dev.tty.legacy_tiocsti), so only the filter refuses it.
    const script = [
      'import os, fcntl, termios',
      'm, s = os.openpty()',
      'name = os.ttyname(s)',
      'pid = os.fork()',
      'if pid == 0:',
      '    os.setsid()',
      '    fd = os.open(name, os.O_RDWR)',
      '    for label, request, arg in (("tiocsti", termios.TIOCSTI, b"x"), ("winsz", termios.TIOCGWINSZ, bytes(8))):',
      '        try:',
      '            fcntl.ioctl(fd, request, arg); print(label, "ok")',
      '        except OSError as error:',
      '            print(label, error.errno)',
      '    os._exit(0)',
      'os.waitpid(pid, 0)',
    ].join('\n')
    const result = await box.run(`python3 -c ${quote(script)}`)
    expect(result.stdout).toContain('tiocsti 1\n')
    expect(result.stdout).toContain('winsz ok\n')
  })

  it('lets a debugger trace processes inside the sandbox, and no process outside it can be named', async () => {
    box = await harness(workspace)
    const script = [
      'import ctypes, os, signal, sys, time',
      'libc = ctypes.CDLL(None, use_errno=True)',
      'libc.ptrace.argtypes = [ctypes.c_long, ctypes.c_long, ctypes.c_void_p, ctypes.c_void_p]',
      'PTRACE_ATTACH, PTRACE_DETACH = 16, 17',
      'r = libc.ptrace(PTRACE_ATTACH, int(sys.argv[1]), None, None); print("attach-outside", r, ctypes.get_errno())',
      'child = os.fork()',
      'if child == 0:',
      '    time.sleep(30); os._exit(0)',
      'r = libc.ptrace(PTRACE_ATTACH, child, None, None); print("attach-inside", r, ctypes.get_errno() if r else 0)',
      'os.waitpid(child, 0)',
      'libc.ptrace(PTRACE_DETACH, child, None, None); os.kill(child, signal.SIGKILL); os.waitpid(child, 0)',
    ].join('\n')
    const result = await box.run(`python3 -c ${quote(script)} ${process.pid}`)
    // ESRCH: the host's pid names nothing in the sandbox's PID namespace.
    expect(result.stdout).toContain('attach-outside -1 3\n')
    expect(result.stdout).toContain('attach-inside 0 0\n')
  })

  it('keeps the filter file read-only even when the workspace holds the folder it lives in', async () => {
    box = await harness(workspace, { runtimeDir: workspace })
    const result = await box.run(`for f in "$RUNTIME"/seccomp-*.bpf; do printf junk > "$f"; done; rm -rf "$RUNTIME"; ls "$RUNTIME" | wc -l`, {}, {
      PATH: process.env['PATH'] ?? '/usr/bin:/bin',
      RUNTIME: join(workspace, `conch-sandbox-${process.getuid?.() ?? 0}`),
    })
    expect(result.stderr).toMatch(/Read-only file system/)
    const runtime = join(workspace, `conch-sandbox-${process.getuid?.() ?? 0}`)
    const filter = readdirSync(runtime).find((name) => name.startsWith('seccomp-'))!
    expect(readFileSync(join(runtime, filter)).subarray(0, 4)).toEqual(Buffer.from([0x20, 0, 0, 0]))
    // A filter file changed on the host side is replaced before the next sandbox starts.
    rmSync(join(runtime, filter))
    writeFileSync(join(runtime, filter), 'junk', { mode: 0o400 })
    const again = await box.run(`grep '^Seccomp:' /proc/self/status`)
    expect(again.stdout).toBe('Seccomp:\t2\n')
    expect(readFileSync(join(runtime, filter)).subarray(0, 4)).toEqual(Buffer.from([0x20, 0, 0, 0]))
  })
})

describe.runIf(hasBwrap)('network', () => {
  const interfaces = (text: string) => text.trim().split('\n').sort()
  const list = `tail -n +3 /proc/net/dev | cut -d: -f1 | tr -d ' '`

  it('is loopback only by default, and a confinement that asks for it gets the host’s interfaces', async () => {
    box = await harness(workspace)
    expect(interfaces((await box.run(list)).stdout)).toEqual(['lo'])
    expect(interfaces((await box.run(list, { mode: 'read-only' })).stdout)).toEqual(['lo'])
    const host = readFileSync('/proc/net/dev', 'utf8').split('\n').slice(2).map((line) => line.split(':')[0]!.trim()).filter(Boolean)
    expect(interfaces((await box.run(list, { network: true })).stdout)).toEqual(host.sort())
  })

  it('configured on, a confinement can still ask for none', async () => {
    box = await harness(workspace, { network: true })
    expect(interfaces((await box.run(list, { network: false })).stdout)).toEqual(['lo'])
    expect(box.ctx.sandbox.networkAllowed()).toBe(true)
  })
})


describe.runIf(hasBwrap)('set-ID files in the workspace, as root', () => {
  it('refuses chmod to a set-user-ID or set-group-ID mode and creation with one, by every call that takes a mode; ordinary modes work', async () => {
    box = await harness(workspace)
    const python = `
import ctypes, os, stat
def attempt(name, call):
    try:
        call()
        print(name, 'allowed')
    except OSError as error:
        print(name, os.strerror(error.errno))
libc = ctypes.CDLL(None, use_errno=True)
def fchmodat2(path, mode):
    if libc.syscall(452, -100, path.encode(), mode, 0) != 0:
        raise OSError(ctypes.get_errno(), 'fchmodat2')
attempt('open', lambda: os.close(os.open('made-open', os.O_CREAT | os.O_WRONLY, 0o4755)))
attempt('mknod', lambda: os.mknod('made-mknod', stat.S_IFREG | 0o2755))
fd = os.open('plain', os.O_CREAT | os.O_WRONLY, 0o755)
attempt('fchmod', lambda: os.fchmod(fd, 0o4755))
attempt('fchmodat2', lambda: fchmodat2('plain', 0o6755))
attempt('chmod 755', lambda: os.chmod('plain', 0o755))
`
    const result = await box.run(
      `cd ${quote(workspace)} && cp /bin/bash rootsh && chmod 4755 rootsh; echo "chmod=$?"; chmod g+s rootsh; echo "g+s=$?"
       install -m 4755 /bin/true installed; echo "install=$?"
       python3 -c ${quote(python)}
       mkdir -m 775 shared && chmod 750 rootsh && ./rootsh -c 'echo bash-runs'`,
      { mode: 'workspace-write' },
    )
    expect(result.stdout).toMatch(/^chmod=1$/m)
    expect(result.stdout).toMatch(/^g\+s=1$/m)
    expect(result.stdout).toMatch(/^install=1$/m)
    expect(result.stderr).toMatch(/^chmod: changing permissions of 'rootsh': Operation not permitted$/m)
    for (const call of ['open', 'mknod', 'fchmod', 'fchmodat2']) expect(result.stdout).toContain(`${call} Operation not permitted\n`)
    expect(result.stdout).toContain('chmod 755 allowed\n')
    expect(result.stdout).toContain('bash-runs\n')
    for (const file of readdirSync(workspace)) expect([file, statSync(join(workspace, file)).mode & 0o6000]).toEqual([file, 0])
  })
})
