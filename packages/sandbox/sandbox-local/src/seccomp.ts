/**
 * The seccomp filter of a bubblewrap sandbox: a classic BPF program (seccomp(2)) that bubblewrap
 * loads from a descriptor (`--seccomp FD`) before it executes the sandboxed command. It denies
 * the calls a confined terminal never needs that reach the kernel's global state, namespace
 * flags of `clone`, `TIOCSTI`/`TIOCLINUX` (typing into another terminal), and S_ISUID/S_ISGID
 * modes (a set-ID file in the workspace runs as its owner for any host user). The README's "The
 * seccomp filter" lists every rule in order and why. `struct seccomp_data`: `nr` at offset 0,
 * `arch` at 4, `args[i]` at 16 + 8·i, little-endian on both architectures.
 */

/** An architecture the filter has a syscall table for (`uname -m` names). */
export type SeccompArch = 'x86_64' | 'aarch64'

/** `AUDIT_ARCH_*` values from linux/audit.h: the `arch` field of `struct seccomp_data`. */
export const AUDIT_ARCH: Record<SeccompArch, number> = {
  x86_64: 0xc000003e,
  aarch64: 0xc00000b7,
}

/** `__X32_SYSCALL_BIT` (x86_64 only). */
export const X32_SYSCALL_BIT = 0x40000000

import { ARGUMENT_RULES, DENIED_SYSCALLS, NOSYS_SYSCALLS } from '@conch/sandbox'

export { ARGUMENT_RULES, CLONE_NAMESPACE_FLAGS, DENIED_SYSCALLS, INJECTING_IOCTLS, NOSYS_SYSCALLS, SETID_MODE_BITS, type ArgumentRule } from '@conch/sandbox'

/** Return actions (linux/seccomp.h). */
export const SECCOMP_RET = {
  KILL_PROCESS: 0x80000000,
  ERRNO: 0x00050000,
  ALLOW: 0x7fff0000,
} as const

export const EPERM = 1
export const ENOSYS = 38

/**
 * Syscall numbers for the calls the filter names, per architecture (`__NR_<name>`). x86_64 from
 * arch/x86/entry/syscalls/syscall_64.tbl (asm/unistd_64.h); aarch64 from
 * include/uapi/asm-generic/unistd.h.
 */
export const SYSCALL_NUMBERS: Record<SeccompArch, Readonly<Record<string, number>>> = {
  x86_64: {
    clone: 56, clone3: 435, ptrace: 101, ioctl: 16, openat2: 437,
    chmod: 90, fchmod: 91, fchmodat: 268, fchmodat2: 452, open: 2, openat: 257, creat: 85, mknod: 133, mknodat: 259,
    mount: 165, umount2: 166, pivot_root: 155, move_mount: 429, open_tree: 428, fsopen: 430,
    fsconfig: 431, fsmount: 432, fspick: 433, mount_setattr: 442, unshare: 272, setns: 308,
    kexec_load: 246, kexec_file_load: 320, init_module: 175, finit_module: 313, delete_module: 176,
    create_module: 174, get_kernel_syms: 177, query_module: 178, bpf: 321, perf_event_open: 298,
    keyctl: 250, add_key: 248, request_key: 249, userfaultfd: 323, swapon: 167, swapoff: 168,
    reboot: 169, settimeofday: 164, clock_settime: 227, clock_adjtime: 305, acct: 163, quotactl: 179,
    quotactl_fd: 443, open_by_handle_at: 304, name_to_handle_at: 303, lookup_dcookie: 212, iopl: 172,
    ioperm: 173, nfsservctl: 180, sethostname: 170, setdomainname: 171, syslog: 103, uselib: 134,
    ustat: 136, sysfs: 139, _sysctl: 156, fanotify_init: 300, io_uring_setup: 425, io_uring_enter: 426,
    io_uring_register: 427,
  },
  aarch64: {
    clone: 220, clone3: 435, ptrace: 117, ioctl: 29, openat2: 437,
    fchmod: 52, fchmodat: 53, fchmodat2: 452, openat: 56, mknodat: 33,
    mount: 40, umount2: 39, pivot_root: 41, move_mount: 429, open_tree: 428, fsopen: 430,
    fsconfig: 431, fsmount: 432, fspick: 433, mount_setattr: 442, unshare: 97, setns: 268,
    kexec_load: 104, kexec_file_load: 294, init_module: 105, finit_module: 273, delete_module: 106,
    bpf: 280, perf_event_open: 241, keyctl: 219, add_key: 217, request_key: 218, userfaultfd: 282,
    swapon: 224, swapoff: 225, reboot: 142, settimeofday: 170, clock_settime: 112, clock_adjtime: 266,
    acct: 89, quotactl: 60, quotactl_fd: 443, open_by_handle_at: 265, name_to_handle_at: 264,
    lookup_dcookie: 18, nfsservctl: 42, sethostname: 161, setdomainname: 162, syslog: 116,
    fanotify_init: 262, io_uring_setup: 425, io_uring_enter: 426, io_uring_register: 427,
  },
}

/** The seccomp architecture of a Node.js `process.arch`, or undefined when there is no table for it. */
export function seccompArchOf(nodeArch: string): SeccompArch | undefined {
  if (nodeArch === 'x64') return 'x86_64'
  if (nodeArch === 'arm64') return 'aarch64'
  return undefined
}

/** One `struct sock_filter` (linux/filter.h): opcode, jump offsets if true / if false, constant. */
export interface BpfInstruction {
  code: number
  jt: number
  jf: number
  k: number
}

/** Classic BPF opcodes the program uses (linux/bpf_common.h). */
export const BPF = {
  LD_W_ABS: 0x20, // BPF_LD | BPF_W | BPF_ABS
  JEQ_K: 0x15, // BPF_JMP | BPF_JEQ | BPF_K
  JGE_K: 0x35, // BPF_JMP | BPF_JGE | BPF_K
  JSET_K: 0x45, // BPF_JMP | BPF_JSET | BPF_K
  RET_K: 0x06, // BPF_RET | BPF_K
} as const

/** Offsets into `struct seccomp_data` (`args[i]` at 16 + 8·i, its low half first). */
const NR = 0
const ARCH = 4
const argLow = (index: number) => 16 + 8 * index

/** `kill`, `deny`, `nosys`, or `rule:<name>` (an argument rule's block). */
type Label = string
type Step =
  | { op: 'load'; offset: number }
  | { op: 'jump'; code: number; k: number; ifTrue: Label | null; ifFalse: Label | null }
  | { op: 'ret'; k: number; label?: Label }
  | { op: 'mark'; label: Label }

export interface SeccompOptions {
  arch: SeccompArch
  /** Names from `DENIED_SYSCALLS` (default: all of them). A name the arch has no number for is skipped. */
  deny?: readonly string[]
}

/**
 * Assembles the filter for `arch` as `struct sock_filter` instructions. Jumps are resolved from
 * labels and only go forward (classic BPF has no backward jumps); a jump farther than 255
 * instructions (the 8-bit offset) throws.
 */
export function seccompInstructions(options: SeccompOptions): BpfInstruction[] {
  const numbers = SYSCALL_NUMBERS[options.arch]
  const names = options.deny ?? DENIED_SYSCALLS.map(([name]) => name)
  const denied = [...new Set(names.map((name) => numbers[name]).filter((nr): nr is number => nr !== undefined))]
  const steps: Step[] = [
    { op: 'load', offset: ARCH },
    { op: 'jump', code: BPF.JEQ_K, k: AUDIT_ARCH[options.arch], ifTrue: null, ifFalse: 'kill' },
    { op: 'load', offset: NR },
  ]
  if (options.arch === 'x86_64') steps.push({ op: 'jump', code: BPF.JGE_K, k: X32_SYSCALL_BIT, ifTrue: 'deny', ifFalse: null })
  for (const nr of denied) steps.push({ op: 'jump', code: BPF.JEQ_K, k: nr, ifTrue: 'deny', ifFalse: null })
  for (const name of NOSYS_SYSCALLS) {
    if (numbers[name] !== undefined) steps.push({ op: 'jump', code: BPF.JEQ_K, k: numbers[name], ifTrue: 'nosys', ifFalse: null })
  }
  const rules = ARGUMENT_RULES.filter((rule) => numbers[rule.name] !== undefined)
  for (const rule of rules) steps.push({ op: 'jump', code: BPF.JEQ_K, k: numbers[rule.name]!, ifTrue: `rule:${rule.name}`, ifFalse: null })
  steps.push({ op: 'ret', k: SECCOMP_RET.ALLOW })
  for (const rule of rules) {
    steps.push({ op: 'mark', label: `rule:${rule.name}` }, { op: 'load', offset: argLow(rule.arg) })
    if (rule.anyBit !== undefined) steps.push({ op: 'jump', code: BPF.JSET_K, k: rule.anyBit, ifTrue: 'deny', ifFalse: null })
    for (const value of rule.oneOf ?? []) steps.push({ op: 'jump', code: BPF.JEQ_K, k: value, ifTrue: 'deny', ifFalse: null })
    steps.push({ op: 'ret', k: SECCOMP_RET.ALLOW })
  }
  steps.push(
    { op: 'ret', k: (SECCOMP_RET.ERRNO | EPERM) >>> 0, label: 'deny' },
    { op: 'ret', k: (SECCOMP_RET.ERRNO | ENOSYS) >>> 0, label: 'nosys' },
    { op: 'ret', k: SECCOMP_RET.KILL_PROCESS, label: 'kill' },
  )

  // Index of each label (marks take no slot; a labelled ret is its own target).
  const at = new Map<Label, number>()
  let index = 0
  for (const step of steps) {
    if (step.op === 'mark') at.set(step.label, index)
    else {
      if (step.op === 'ret' && step.label) at.set(step.label, index)
      index++
    }
  }
  const out: BpfInstruction[] = []
  for (const step of steps) {
    if (step.op === 'mark') continue
    const here = out.length
    if (step.op === 'load') out.push({ code: BPF.LD_W_ABS, jt: 0, jf: 0, k: step.offset })
    else if (step.op === 'ret') out.push({ code: BPF.RET_K, jt: 0, jf: 0, k: step.k >>> 0 })
    else {
      const offset = (label: Label | null) => {
        if (label === null) return 0
        const distance = at.get(label)! - here - 1
        if (distance < 0 || distance > 255) throw new Error(`seccomp: a jump to ${label} spans ${distance} instructions (at most 255)`)
        return distance
      }
      out.push({ code: step.code, jt: offset(step.ifTrue), jf: offset(step.ifFalse), k: step.k >>> 0 })
    }
  }
  return out
}

/** The program as bytes for `--seccomp FD`: each instruction as u16 code, u8 jt, u8 jf, u32 k, little-endian. */
export function seccompProgram(options: SeccompOptions): Buffer {
  const instructions = seccompInstructions(options)
  const bytes = Buffer.alloc(instructions.length * 8)
  instructions.forEach((instruction, i) => {
    bytes.writeUInt16LE(instruction.code, i * 8)
    bytes.writeUInt8(instruction.jt, i * 8 + 2)
    bytes.writeUInt8(instruction.jf, i * 8 + 3)
    bytes.writeUInt32LE(instruction.k, i * 8 + 4)
  })
  return bytes
}
