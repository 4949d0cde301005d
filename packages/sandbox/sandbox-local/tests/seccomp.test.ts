/**
 * The seccomp generator, checked by running the program it emits in a small classic-BPF
 * interpreter (the subset the kernel's seccomp checker accepts and the program uses), and its
 * syscall tables checked against the kernel headers installed here. The real kernel runs the
 * filter in tests/bubblewrap.test.ts.
 */
import { existsSync, readFileSync } from 'node:fs'
import { describe, expect, it } from 'vitest'
import {
  AUDIT_ARCH,
  BPF,
  CLONE_NAMESPACE_FLAGS,
  ARGUMENT_RULES,
  DENIED_SYSCALLS,
  ENOSYS,
  NOSYS_SYSCALLS,
  SETID_MODE_BITS,
  INJECTING_IOCTLS,
  EPERM,
  SECCOMP_RET,
  SYSCALL_NUMBERS,
  X32_SYSCALL_BIT,
  seccompArchOf,
  seccompInstructions,
  seccompProgram,
  type BpfInstruction,
  type SeccompArch,
} from '../src/index.ts'

interface SeccompData {
  nr: number
  arch: number
  args?: number[] | undefined
}

/** Runs a classic BPF program over `struct seccomp_data`; returns the action's 32-bit value. */
function run(program: readonly BpfInstruction[], data: SeccompData): number {
  const word = (offset: number): number => {
    if (offset === 0) return data.nr >>> 0
    if (offset === 4) return data.arch >>> 0
    if (offset >= 16 && offset < 64 && offset % 4 === 0) {
      const arg = BigInt.asUintN(64, BigInt(data.args?.[Math.floor((offset - 16) / 8)] ?? 0))
      return Number((offset - 16) % 8 === 0 ? arg & 0xffffffffn : arg >> 32n)
    }
    throw new Error(`load from offset ${offset}`)
  }
  let accumulator = 0
  for (let pc = 0; pc < program.length; ) {
    const { code, jt, jf, k } = program[pc]!
    switch (code) {
      case BPF.LD_W_ABS:
        accumulator = word(k)
        pc++
        break
      case BPF.JEQ_K:
        pc += 1 + (accumulator === k ? jt : jf)
        break
      case BPF.JGE_K:
        pc += 1 + (accumulator >= k ? jt : jf)
        break
      case BPF.JSET_K:
        pc += 1 + ((accumulator & k) !== 0 ? jt : jf)
        break
      case BPF.RET_K:
        return k >>> 0
      default:
        throw new Error(`opcode ${code.toString(16)} at ${pc}`)
    }
  }
  throw new Error('the program fell off its end')
}

const DENY = (SECCOMP_RET.ERRNO | EPERM) >>> 0
const NOSYS = (SECCOMP_RET.ERRNO | ENOSYS) >>> 0
const ARCHES: SeccompArch[] = ['x86_64', 'aarch64']

describe.each(ARCHES)('the seccomp filter for %s', (arch) => {
  const program = seccompInstructions({ arch })
  const numbers = SYSCALL_NUMBERS[arch]
  const call = (nr: number, args?: number[]) => run(program, { arch: AUDIT_ARCH[arch], nr, args })

  it('denies every listed call that exists on the architecture with EPERM', () => {
    const present = DENIED_SYSCALLS.map(([name]) => name).filter((name) => numbers[name] !== undefined)
    expect(present.length).toBeGreaterThan(40)
    for (const name of present) expect([name, call(numbers[name]!)]).toEqual([name, DENY])
  })

  it('allows every other call number up to 1024, ptrace included, and the argument rules\' calls with all-zero arguments', () => {
    const denied = new Set([...DENIED_SYSCALLS.map(([name]) => name), ...NOSYS_SYSCALLS].map((name) => numbers[name]).filter((nr) => nr !== undefined))
    for (let nr = 0; nr < 1024; nr++) {
      if (denied.has(nr)) continue
      expect([nr, call(nr)]).toEqual([nr, SECCOMP_RET.ALLOW])
    }
    expect(call(numbers['ptrace']!)).toBe(SECCOMP_RET.ALLOW)
  })

  it('answers clone3 and openat2 with ENOSYS so that callers fall back to clone and openat', () => {
    expect(call(numbers['clone3']!)).toBe(NOSYS)
    expect(call(numbers['openat2']!)).toBe(NOSYS)
  })

  it('denies S_ISUID or S_ISGID in the mode argument of every call that sets or creates with a mode, on its low 32 bits, and allows other modes', () => {
    const modeCalls = ARGUMENT_RULES.filter((rule) => rule.anyBit === SETID_MODE_BITS && numbers[rule.name] !== undefined)
    expect(modeCalls.map((rule) => rule.name)).toEqual(arch === 'x86_64' ? ['chmod', 'fchmod', 'fchmodat', 'fchmodat2', 'open', 'openat', 'creat', 'mknod', 'mknodat'] : ['fchmod', 'fchmodat', 'fchmodat2', 'openat', 'mknodat'])
    for (const { name, arg } of modeCalls) {
      const at = (mode: number) => call(numbers[name]!, Array.from({ length: 6 }, (_, index) => (index === arg ? mode : 0o777)))
      for (const mode of [0o4755, 0o2755, 0o6755, 0o4000, 0o100000 | 0o2644, 2 ** 40 + 0o4755]) expect([name, mode.toString(8), at(mode)]).toEqual([name, mode.toString(8), DENY])
      for (const mode of [0o755, 0o644, 0o1777, 0o100000 | 0o644, 2 ** 40 + 0o755]) expect([name, mode.toString(8), at(mode)]).toEqual([name, mode.toString(8), SECCOMP_RET.ALLOW])
    }
  })

  it('denies clone with any namespace flag and allows fork- and thread-style clones', () => {
    for (const [name, flag] of Object.entries(CLONE_NAMESPACE_FLAGS)) {
      expect([name, call(numbers['clone']!, [flag | 17])]).toEqual([name, DENY])
    }
    const SIGCHLD = 17
    const threadFlags = 0x00000100 | 0x00000200 | 0x00000400 | 0x00000800 | 0x00010000 | 0x00040000 | 0x00080000 | 0x00100000 | 0x00200000
    expect(call(numbers['clone']!, [SIGCHLD])).toBe(SECCOMP_RET.ALLOW)
    expect(call(numbers['clone']!, [threadFlags])).toBe(SECCOMP_RET.ALLOW)
    // Only the low 32 bits are flags for legacy clone: high bits change nothing.
    expect(call(numbers['clone']!, [2 ** 40 + SIGCHLD])).toBe(SECCOMP_RET.ALLOW)
  })

  it('denies the ioctls that inject terminal input, on the low 32 bits of the request, and allows the rest', () => {
    for (const [name, request] of Object.entries(INJECTING_IOCTLS)) {
      expect([name, call(numbers['ioctl']!, [0, request])]).toEqual([name, DENY])
      // The kernel takes the request as an unsigned int: high bits do not hide it.
      expect([name, call(numbers['ioctl']!, [0, 2 ** 40 + request])]).toEqual([name, DENY])
    }
    const TCGETS = 0x5401
    const TIOCGWINSZ = 0x5413
    const TIOCSWINSZ = 0x5414
    for (const request of [TCGETS, TIOCGWINSZ, TIOCSWINSZ, 0]) expect(call(numbers['ioctl']!, [0, request])).toBe(SECCOMP_RET.ALLOW)
  })

  it('kills a call made with a foreign architecture', () => {
    const foreign = [0x40000003 /* i386 */, 0x40000028 /* ARM */, AUDIT_ARCH[arch === 'x86_64' ? 'aarch64' : 'x86_64']]
    for (const other of foreign) expect(run(program, { arch: other, nr: 0 })).toBe(SECCOMP_RET.KILL_PROCESS)
  })

  it('emits 8 bytes per instruction, little-endian, starting with the arch load', () => {
    const bytes = seccompProgram({ arch })
    expect(bytes.length).toBe(program.length * 8)
    expect(bytes.subarray(0, 8)).toEqual(Buffer.from([0x20, 0, 0, 0, 4, 0, 0, 0]))
    expect(bytes.readUInt32LE(12)).toBe(AUDIT_ARCH[arch])
    expect(program.length).toBeLessThan(256)
  })
})

describe('x86_64 specifics', () => {
  it('denies x32 calls (the x32 bit set), the numbers of the same calls under another ABI', () => {
    const program = seccompInstructions({ arch: 'x86_64' })
    expect(run(program, { arch: AUDIT_ARCH.x86_64, nr: X32_SYSCALL_BIT + 0 })).toBe(DENY)
    expect(run(program, { arch: AUDIT_ARCH.x86_64, nr: X32_SYSCALL_BIT + 165 })).toBe(DENY)
    expect(run(program, { arch: AUDIT_ARCH.x86_64, nr: 0 })).toBe(SECCOMP_RET.ALLOW)
  })

  it('a deny list limited to some names denies those only', () => {
    const program = seccompInstructions({ arch: 'x86_64', deny: ['mount', 'no_such_call'] })
    expect(run(program, { arch: AUDIT_ARCH.x86_64, nr: 165 })).toBe(DENY)
    expect(run(program, { arch: AUDIT_ARCH.x86_64, nr: 272 })).toBe(SECCOMP_RET.ALLOW)
  })
})

describe('seccompArchOf', () => {
  it('maps Node architectures to the ones with a table, and nothing else', () => {
    expect(seccompArchOf('x64')).toBe('x86_64')
    expect(seccompArchOf('arm64')).toBe('aarch64')
    expect(seccompArchOf('ia32')).toBeUndefined()
    expect(seccompArchOf('riscv64')).toBeUndefined()
  })
})

/** `__NR_<name> <number>` pairs of a UAPI header. */
function headerNumbers(path: string): Map<string, number> {
  const numbers = new Map<string, number>()
  for (const match of readFileSync(path, 'utf8').matchAll(/^#define __NR(?:3264)?_(\w+)\s+(\d+)\s*$/gm)) {
    numbers.set(match[1]!, Number(match[2]))
  }
  return numbers
}

/** `nr` when it lies past every number `header` defines (a call newer than the headers installed, fchmodat2 of Linux 6.6), else undefined. */
function newerThan(header: Map<string, number>, nr: number): number | undefined {
  return nr > Math.max(...header.values()) ? nr : undefined
}

const X86_HEADER = '/usr/include/x86_64-linux-gnu/asm/unistd_64.h'
const GENERIC_HEADER = '/usr/include/asm-generic/unistd.h'
const IOCTL_HEADER = '/usr/include/asm-generic/ioctls.h'

describe('the syscall tables match the kernel headers', () => {
  // The headers come with linux-libc-dev (Debian); a machine without them has nothing to compare.
  it.runIf(existsSync(X86_HEADER))('x86_64 against asm/unistd_64.h', () => {
    const header = headerNumbers(X86_HEADER)
    for (const [name, nr] of Object.entries(SYSCALL_NUMBERS.x86_64)) expect([name, header.get(name) ?? newerThan(header, nr)]).toEqual([name, nr])
  })

  it.runIf(existsSync(GENERIC_HEADER))('aarch64 against asm-generic/unistd.h, and calls missing there are missing in the table', () => {
    const header = headerNumbers(GENERIC_HEADER)
    for (const [name, nr] of Object.entries(SYSCALL_NUMBERS.aarch64)) expect([name, header.get(name) ?? newerThan(header, nr)]).toEqual([name, nr])
    for (const [name] of DENIED_SYSCALLS) {
      if (!header.has(name)) expect([name, SYSCALL_NUMBERS.aarch64[name]]).toEqual([name, undefined])
    }
  })

  it.runIf(existsSync(IOCTL_HEADER))('the injecting ioctls against asm-generic/ioctls.h', () => {
    const header = new Map<string, number>()
    for (const match of readFileSync(IOCTL_HEADER, 'utf8').matchAll(/^#define\s+(TIOC\w+)\s+(0x[0-9A-Fa-f]+)\b/gm)) header.set(match[1]!, Number(match[2]))
    for (const [name, request] of Object.entries(INJECTING_IOCTLS)) expect([name, header.get(name)]).toEqual([name, request])
  })
})
