import { describe, expect, it } from 'vitest'
import { eager, endGap, IDLE_PACER, pace, probeRan } from '../src/probe-pacer.ts'

const asked = { outputCount: 0, floorMs: 10, gapEnded: false }

describe('probe pacer', () => {
  it('lets the first probe run at once', () => {
    expect(pace(IDLE_PACER, { ...asked, now: 0 })).toEqual({ pacer: IDLE_PACER, due: true })
  })

  it('waits the floor after a cheap probe, and nine times the CPU cost after a dear one', () => {
    const cheap = probeRan(IDLE_PACER, 100, 0.5)
    expect(pace(cheap, { ...asked, now: 104 })).toMatchObject({ due: false, armMs: 6 })
    expect(pace(cheap, { ...asked, now: 110 })).toMatchObject({ due: true })
    const dear = probeRan(IDLE_PACER, 100, 4)
    expect(pace(dear, { ...asked, now: 101 })).toMatchObject({ due: false, armMs: 35 })
  })

  it('keeps an armed gap that ends in time, and brings a later one forward when the line turns prompt-shaped', () => {
    const ran = probeRan(IDLE_PACER, 100, 0.3)
    const armed = pace(ran, { ...asked, now: 101 })
    expect(armed).toMatchObject({ due: false, armMs: 9 })
    expect(pace(armed.pacer, { ...asked, now: 102 })).toEqual({ pacer: armed.pacer, due: false })
    const shaped = eager(armed.pacer, 3)
    const forward = pace(shaped, { ...asked, outputCount: 3, now: 102 })
    expect(forward.due).toBe(false)
    expect(forward.armMs).toBeCloseTo(0.7, 5)
    // Output after the prompt-shaped line: back to the floor.
    expect(pace(endGap(forward.pacer), { ...asked, outputCount: 4, now: 103 })).toMatchObject({ due: false, armMs: 7 })
  })

  it('takes a gap timer that fired up to a millisecond early as due', () => {
    const ran = probeRan(IDLE_PACER, 100, 0)
    expect(pace(endGap(ran), { ...asked, now: 109.5, gapEnded: true })).toMatchObject({ due: true })
    expect(pace(ran, { ...asked, now: 109.5 })).toMatchObject({ due: false, armMs: 0.5 })
  })
})
