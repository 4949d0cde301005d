/**
 * The container's seccomp profile (`seccomp=<JSON>` in `HostConfig.SecurityOpt`), rendered from
 * the same rules as bubblewrap's BPF filter (`DENIED_SYSCALLS`, `NOSYS_SYSCALLS`,
 * `ARGUMENT_RULES` of `@conch/sandbox`): every call allowed but those, which fail with EPERM
 * (ENOSYS for `NOSYS_SYSCALLS`). It replaces Docker's default profile, whose dangerous calls the
 * list denies too (mounts, namespaces, modules, kexec, BPF, perf, keyrings, userfaultfd, the
 * clock, file handles, io_uring), most of which the capabilities the container lacks refuse as
 * well. The runtime (runc) builds it for its native architecture, whose calls alone it allows:
 * another ABI (i386, x32) gets the runtime's bad-architecture action; a name its libseccomp does
 * not know (`fchmodat2` on an older one) is skipped, and the call is allowed.
 */
import { ARGUMENT_RULES, DENIED_SYSCALLS, NOSYS_SYSCALLS } from '@conch/sandbox'

const EPERM = 1
const ENOSYS = 38

interface ProfileRule {
  names: string[]
  action: 'SCMP_ACT_ERRNO'
  errnoRet: number
  args?: Array<{ index: number; value: number; valueTwo: number; op: 'SCMP_CMP_MASKED_EQ' }>
}

/** The profile as Docker's JSON format has it (moby's `types.Seccomp`). */
export interface SeccompProfile {
  defaultAction: 'SCMP_ACT_ALLOW'
  syscalls: ProfileRule[]
}

/** The single bits of `mask`. */
const bitsOf = (mask: number): number[] => Array.from({ length: 32 }, (_, bit) => 2 ** bit).filter((bit) => (mask & bit) !== 0)

/**
 * The profile. A rule's arguments are compared on 64 bits by libseccomp, so each test masks the
 * low 32 bits the kernel reads: one rule per bit of `anyBit` (the argument has that bit), one per
 * value of `oneOf` (its low 32 bits are that value); rules of one call are alternatives.
 */
export function seccompProfile(): SeccompProfile {
  const syscalls: ProfileRule[] = [
    { names: DENIED_SYSCALLS.map(([name]) => name), action: 'SCMP_ACT_ERRNO', errnoRet: EPERM },
    { names: [...NOSYS_SYSCALLS], action: 'SCMP_ACT_ERRNO', errnoRet: ENOSYS },
  ]
  for (const rule of ARGUMENT_RULES) {
    const tests = [...bitsOf(rule.anyBit ?? 0).map((bit) => [bit, bit] as const), ...(rule.oneOf ?? []).map((value) => [0xffffffff, value] as const)]
    for (const [mask, value] of tests) {
      syscalls.push({ names: [rule.name], action: 'SCMP_ACT_ERRNO', errnoRet: EPERM, args: [{ index: rule.arg, value: mask, valueTwo: value, op: 'SCMP_CMP_MASKED_EQ' }] })
    }
  }
  return { defaultAction: 'SCMP_ACT_ALLOW', syscalls }
}
