/**
 * The system-call rules every sandbox provider enforces with seccomp, one list rendered twice:
 * as a classic BPF program for bubblewrap (`seccomp.ts` of sandbox-local) and as a Docker
 * seccomp profile (sandbox-docker). Names are the kernel's (`__NR_<name>`); each provider maps
 * them to numbers or lets the engine do it.
 */

/** Namespace flags of clone(2) (linux/sched.h). */
export const CLONE_NAMESPACE_FLAGS = {
  CLONE_NEWNS: 0x00020000,
  CLONE_NEWCGROUP: 0x02000000,
  CLONE_NEWUTS: 0x04000000,
  CLONE_NEWIPC: 0x08000000,
  CLONE_NEWUSER: 0x10000000,
  CLONE_NEWPID: 0x20000000,
  CLONE_NEWNET: 0x40000000,
} as const

export const CLONE_NAMESPACE_MASK = Object.values(CLONE_NAMESPACE_FLAGS).reduce((mask, flag) => mask | flag, 0) >>> 0

/** Terminal ioctl requests that inject input (asm-generic/ioctls.h; the same on both arches). */
export const INJECTING_IOCTLS = {
  TIOCSTI: 0x5412,
  TIOCLINUX: 0x541c,
} as const

/**
 * The denied system calls, each with why a confined terminal does not need it. A call missing
 * from an architecture's table (`iopl` on aarch64) does not exist there and needs no rule.
 */
export const DENIED_SYSCALLS: ReadonlyArray<readonly [name: string, reason: string]> = [
  ['mount', 'mounts'],
  ['umount2', 'mounts'],
  ['pivot_root', 'mounts'],
  ['move_mount', 'mounts (new mount API)'],
  ['open_tree', 'mounts (new mount API)'],
  ['fsopen', 'mounts (new mount API)'],
  ['fsconfig', 'mounts (new mount API)'],
  ['fsmount', 'mounts (new mount API)'],
  ['fspick', 'mounts (new mount API)'],
  ['mount_setattr', 'mounts (new mount API)'],
  ['unshare', 'new namespaces'],
  ['setns', 'entering namespaces'],
  ['kexec_load', 'loading a new kernel'],
  ['kexec_file_load', 'loading a new kernel'],
  ['init_module', 'kernel modules'],
  ['finit_module', 'kernel modules'],
  ['delete_module', 'kernel modules'],
  ['create_module', 'kernel modules (obsolete)'],
  ['get_kernel_syms', 'kernel modules (obsolete)'],
  ['query_module', 'kernel modules (obsolete)'],
  ['bpf', 'eBPF programs and maps'],
  ['perf_event_open', 'performance monitoring of the kernel and other processes'],
  ['keyctl', 'kernel keyrings (not namespaced)'],
  ['add_key', 'kernel keyrings'],
  ['request_key', 'kernel keyrings'],
  ['userfaultfd', 'user page-fault handling, a kernel exploitation aid'],
  ['swapon', 'swap'],
  ['swapoff', 'swap'],
  ['reboot', 'reboot and kexec'],
  ['settimeofday', 'the system clock'],
  ['clock_settime', 'the system clock'],
  ['clock_adjtime', 'the system clock'],
  ['acct', 'process accounting'],
  ['quotactl', 'disk quotas'],
  ['quotactl_fd', 'disk quotas'],
  ['open_by_handle_at', 'opening files by handle, past the mount table'],
  ['name_to_handle_at', 'file handles'],
  ['lookup_dcookie', 'kernel profiling'],
  ['iopl', 'I/O port access'],
  ['ioperm', 'I/O port access'],
  ['nfsservctl', 'the kernel NFS server (obsolete)'],
  ['sethostname', 'the host name'],
  ['setdomainname', 'the NIS domain name'],
  ['syslog', 'the kernel log'],
  ['uselib', 'obsolete library loading'],
  ['ustat', 'obsolete file system statistics'],
  ['sysfs', 'obsolete file system type queries'],
  ['_sysctl', 'obsolete sysctl interface'],
  ['fanotify_init', 'file system wide monitoring'],
  ['io_uring_setup', 'io_uring, a large kernel attack surface (programs fall back to ordinary calls)'],
  ['io_uring_enter', 'io_uring'],
  ['io_uring_register', 'io_uring'],
]

/** The set-user-ID and set-group-ID bits of a file mode (S_ISUID 04000, S_ISGID 02000; inode(7)). */
export const SETID_MODE_BITS = 0o6000

/**
 * A call denied (EPERM) for some values of one argument, compared on its low 32 bits (every
 * argument these rules look at is an `int`, `unsigned int` or `mode_t` to the kernel): when any
 * bit of `anyBit` is set, or when it equals one of `oneOf`.
 */
export interface ArgumentRule {
  name: string
  /** The argument's index (0-based). */
  arg: number
  anyBit?: number
  oneOf?: readonly number[]
  reason: string
}

/**
 * The argument rules. A set-user-ID file in the workspace runs for the host's users with its
 * owner's rights (root when the sandbox runs as root), so no mode a confined process gives a file
 * may carry S_ISUID or S_ISGID. glibc passes mode 0 to open without O_CREAT, so testing the mode
 * alone refuses nothing real.
 */
export const ARGUMENT_RULES: readonly ArgumentRule[] = [
  { name: 'clone', arg: 0, anyBit: CLONE_NAMESPACE_MASK, reason: 'new namespaces (the kernel reads the low 32 bits of legacy clone\'s flags)' },
  { name: 'ioctl', arg: 1, oneOf: Object.values(INJECTING_IOCTLS), reason: 'terminal input injection (the request is an unsigned int)' },
  { name: 'chmod', arg: 1, anyBit: SETID_MODE_BITS, reason: 'set-ID modes' },
  { name: 'fchmod', arg: 1, anyBit: SETID_MODE_BITS, reason: 'set-ID modes' },
  { name: 'fchmodat', arg: 2, anyBit: SETID_MODE_BITS, reason: 'set-ID modes' },
  { name: 'fchmodat2', arg: 2, anyBit: SETID_MODE_BITS, reason: 'set-ID modes (Linux 6.6)' },
  { name: 'open', arg: 2, anyBit: SETID_MODE_BITS, reason: 'set-ID modes at creation' },
  { name: 'openat', arg: 3, anyBit: SETID_MODE_BITS, reason: 'set-ID modes at creation' },
  { name: 'creat', arg: 1, anyBit: SETID_MODE_BITS, reason: 'set-ID modes at creation' },
  { name: 'mknod', arg: 1, anyBit: SETID_MODE_BITS, reason: 'set-ID modes at creation (mknod makes regular files too)' },
  { name: 'mknodat', arg: 2, anyBit: SETID_MODE_BITS, reason: 'set-ID modes at creation' },
]

/**
 * Calls answered with ENOSYS: their arguments live in memory a filter cannot read. glibc falls
 * back to `clone` when `clone3` is missing (threads and fork keep working); `openat2` (its mode in
 * `struct open_how`) is called by no libc function, only by programs that ask for it, and those
 * fall back to `openat`.
 */
export const NOSYS_SYSCALLS: readonly string[] = ['clone3', 'openat2']
