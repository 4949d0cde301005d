import { describe, expect, it } from 'vitest'
import { encodeStep, planInput } from '../src/input.ts'

const normal = { applicationCursor: false, applicationKeypad: false }
const writes = (input: Parameters<typeof planInput>[0], modes = normal) => planInput(input).steps.map((step) => encodeStep(step, modes))

describe('input plans', () => {
  it('text is typed with line breaks as Enter, and the submitting Enter in the same write', () => {
    expect(writes({ text: 'a\nb\r\nc', submit: true })).toEqual(['a\rb\rc\r'])
    expect(writes({ text: 'q', submit: false })).toEqual(['q'])
    expect(writes({ text: '', submit: false })).toEqual([])
    expect(planInput({ text: 'one\ntwo', submit: true })).toMatchObject({ lines: 'one\rtwo', echo: 'two' })
  })

  it('keys are one write each, encoded for the modes at write time', () => {
    const plan = planInput({ keys: ['Up', { text: 'ls' }, 'Enter'], submit: true })
    expect(plan.steps.map((step) => encodeStep(step, normal))).toEqual(['\x1b[A', 'ls', '\r'])
    expect(encodeStep(plan.steps[0]!, { applicationCursor: true, applicationKeypad: false })).toBe('\x1bOA')
    expect(plan.lines).toBe('\rls\r')
  })

  it('a secret is its value, then Enter, and is named for redaction', () => {
    const plan = planInput({ secret: { name: 'DEMO', value: 'correct-horse' }, submit: false })
    expect(plan.steps.map((step) => encodeStep(step, normal))).toEqual(['correct-horse', '\r'])
    expect(plan.secret).toEqual({ name: 'DEMO', value: 'correct-horse' })
    expect(plan.echo).toBe('')
  })
})
