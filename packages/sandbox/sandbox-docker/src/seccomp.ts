/**
 * The container's seccomp profile (`seccomp=<JSON>` in `HostConfig.SecurityOpt`), from the rules
 * of bubblewrap's filter (`@conch/sandbox`): every call allowed but those, which fail with EPERM
 * (ENOSYS for `NOSYS_SYSCALLS`). It replaces Docker's default, whose dangerous calls the list
 * denies too. runc builds it for the native architecture only (another ABI gets its
 * bad-architecture action); a name its libseccomp does not know is skipped, so allowed.
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
 * The profile. libseccomp compares on 64 bits, so each test masks the low 32 the kernel reads: one
 * rule per bit of `anyBit`, one per value of `oneOf`; rules of one call are alternatives.
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
