/**
 * Read-class system calls and the text of /proc/<pid>/task/<tid>/syscall (proc(5)). A task
 * waiting for terminal input sits in one of these calls. Numbers are the kernel's UAPI numbers
 * per architecture: x86_64's arch/x86/entry/syscalls/syscall_64.tbl (asm/unistd_64.h), arm64's
 * generic include/uapi/asm-generic/unistd.h, which has no poll, select or epoll_wait.
 */

export type ReadSyscall = 'read' | 'readv' | 'poll' | 'ppoll' | 'select' | 'pselect6' | 'epoll_wait' | 'epoll_pwait' | 'epoll_pwait2'

/** Architectures with a table, by Node's `process.arch` name. */
export type SyscallArch = 'x64' | 'arm64'

/** Read-class syscall numbers per architecture. */
export const READ_SYSCALLS: Readonly<Record<SyscallArch, ReadonlyMap<number, ReadSyscall>>> = {
  x64: new Map<number, ReadSyscall>([
    [0, 'read'],
    [7, 'poll'],
    [19, 'readv'],
    [23, 'select'],
    [232, 'epoll_wait'],
    [270, 'pselect6'],
    [271, 'ppoll'],
    [281, 'epoll_pwait'],
    [441, 'epoll_pwait2'],
  ]),
  arm64: new Map<number, ReadSyscall>([
    [22, 'epoll_pwait'],
    [63, 'read'],
    [65, 'readv'],
    [72, 'pselect6'],
    [73, 'ppoll'],
    [441, 'epoll_pwait2'],
  ]),
}

/** The table for `arch` (a `process.arch` value), or undefined when there is none: the exact tier is then off. */
export function readSyscallTable(arch: string): ReadonlyMap<number, ReadSyscall> | undefined {
  return arch === 'x64' || arch === 'arm64' ? READ_SYSCALLS[arch] : undefined
}

/**
 * What /proc/<pid>/task/<tid>/syscall says (proc(5)):
 * - `running` — the task is not blocked (the file holds the word `running`);
 * - `blocked` — blocked but not in a system call (`-1 sp pc`);
 * - `syscall` — blocked in system call `nr` with its six argument registers (`nr a0 … a5 sp pc`,
 *   the number in decimal, the rest in hex).
 */
export type SyscallState =
  | { kind: 'running' }
  | { kind: 'blocked' }
  | { kind: 'syscall'; nr: number; args: readonly [bigint, bigint, bigint, bigint, bigint, bigint] }

/** Parses the syscall file; undefined for text of any other shape (a miss, never a guess). */
export function parseSyscallFile(text: string): SyscallState | undefined {
  const words = text.trim().split(/\s+/)
  if (words.length === 1 && words[0] === 'running') return { kind: 'running' }
  const nr = Number(words[0])
  if (!Number.isSafeInteger(nr)) return undefined
  const hex = words.slice(1)
  if (!hex.every((word) => /^0x[0-9a-f]+$/i.test(word))) return undefined
  if (nr === -1) return hex.length === 2 ? { kind: 'blocked' } : undefined
  if (nr < 0 || hex.length !== 8) return undefined
  const args = hex.slice(0, 6).map((word) => BigInt(word)) as [bigint, bigint, bigint, bigint, bigint, bigint]
  return { kind: 'syscall', nr, args }
}
