import { describe, expect, it } from 'vitest'
import { currentOwner, OWNER_TAG, ownerEnded, ownerOfTag, ownerTag, type OwnerProc } from '../src/index.ts'

/** A /proc of `processes` (pid: start time) seen from the PID namespace `pidns`; `self` is pid 40. */
function procOf(pidns: string | undefined, processes: Record<number, string>): OwnerProc {
  const stat = (pid: number, start: string) => `${pid} (node (worker) x) S 1 ${pid} ${pid} 0 -1 4194560 ${'0 '.repeat(12)}${start} 0 0\n`
  return {
    stat: (pid) => {
      const number = pid === 'self' ? 40 : pid
      return processes[number] === undefined ? undefined : stat(number, processes[number])
    },
    pidNamespace: () => (pidns === undefined ? undefined : `pid:[${pidns}]`),
  }
}

describe('the owner a left-behind thing records', () => {
  it("is this process's PID namespace, pid and start time, which its tag carries", () => {
    const owner = currentOwner(procOf('4026532999', { 40: '123456' }))
    expect(owner).toEqual({ pidns: '4026532999', pid: 40, startTime: '123456' })
    const made = new RegExp(`^agent-${OWNER_TAG}-[0-9a-f]+$`).exec(`agent-${ownerTag(owner!)}-0123abcd`)!
    expect(ownerOfTag(made[1], made[2]!, made[3]!)).toEqual(owner)
    expect(currentOwner(procOf(undefined, { 40: '123456' }))).toBeUndefined()
  })

  it('has ended when its pid no longer runs with its start time in this PID namespace', () => {
    const here = procOf('4026532999', { 40: '100', 77: '555' })
    expect(ownerEnded({ pidns: '4026532999', pid: 77, startTime: '555' }, here)).toBe(false)
    expect(ownerEnded({ pidns: '4026532999', pid: 77, startTime: '554' }, here)).toBe(true)
    expect(ownerEnded({ pidns: '4026532999', pid: 78, startTime: '555' }, here)).toBe(true)
  })

  it('of another PID namespace never has, whatever its pid names here', () => {
    const here = procOf('4026532999', { 40: '100', 77: '555' })
    expect(ownerEnded({ pidns: '4026531836', pid: 78, startTime: '555' }, here)).toBe(false)
    expect(ownerEnded({ pidns: '4026531836', pid: 77, startTime: '1' }, here)).toBe(false)
  })

  it('recorded without a namespace is judged as one of this namespace, and nothing is when this one cannot be read', () => {
    expect(ownerEnded({ pid: 78, startTime: '555' }, procOf('4026532999', { 40: '100' }))).toBe(true)
    expect(ownerEnded({ pid: 40, startTime: '100' }, procOf('4026532999', { 40: '100' }))).toBe(false)
    expect(ownerEnded({ pid: 78, startTime: '555' }, procOf(undefined, { 40: '100' }))).toBe(false)
    expect(ownerEnded({ pidns: '4026532999', pid: 78, startTime: '555' }, procOf(undefined, { 40: '100' }))).toBe(false)
  })
})
