import { describe, expect, it } from 'vitest'
import { planInput } from '../src/input.ts'

const normal = { applicationCursor: false, applicationKeypad: false, bracketedPaste: false, alternateScreen: false }

describe('input plans', () => {
  it('text becomes the text steps: the text, then Enter as its own key press', () => {
    expect(planInput({ text: 'a\nb', submit: true }, normal)).toMatchObject({
      steps: [
        { data: 'a\rb', afterConsumed: false },
        { data: '\r', afterConsumed: true },
      ],
      inputText: 'a\nb',
      lines: 'a\rb',
    })
  })

  it('at the shell’s own prompt one printable line goes with its Enter in one write; anything else keeps Enter apart', () => {
    const prompt = { ...normal, bracketedPaste: true, shellPrompt: true }
    expect(planInput({ text: 'echo hi', submit: true }, prompt).steps).toEqual([{ data: 'echo hi\r', afterConsumed: false, echo: 'echo hi' }])
    expect(planInput({ text: 'echo hi', submit: false }, prompt).steps).toEqual([{ data: 'echo hi', afterConsumed: false, echo: 'echo hi' }])
    expect(planInput({ text: '', submit: true }, prompt).steps).toEqual([{ data: '\r', afterConsumed: false, echo: '' }])
    // An ESC would begin a key sequence with the Enter after it; a line break, a Tab or a signal character is not one plain line.
    for (const text of ['a\nb', 'ls\t', 'x\x03echo hi']) expect(planInput({ text, submit: true }, prompt).steps.at(-1)).toEqual({ data: '\r', afterConsumed: true, echo: '' })
    // A text ending in ESC gets no Enter at all (entersAfter).
    expect(planInput({ text: 'vi\x1b', submit: true }, prompt).steps.map((step) => step.data)).toEqual(['vi\x1b'])
    // Anywhere else (a program the shell started reads), Enter stays its own write.
    expect(planInput({ text: 'echo hi', submit: true }, { ...prompt, shellPrompt: false }).steps).toHaveLength(2)
  })

  it('a signal character in text ends a write: the rest follows once the program consumed it', () => {
    expect(planInput({ text: 'x\x03echo hi', submit: true }, normal).steps).toEqual([
      { data: 'x\x03', afterConsumed: false, echo: '' },
      { data: 'echo hi', afterConsumed: true, echo: 'echo hi' },
      { data: '\r', afterConsumed: true, echo: '' },
    ])
    expect(planInput({ text: 'sleep 9\x1a', submit: false }, normal).steps).toEqual([{ data: 'sleep 9\x1a', afterConsumed: false, echo: '' }])
    expect(planInput({ text: '\x1c\x03', submit: false }, normal).steps.map((step) => step.data)).toEqual(['\x1c', '\x03'])
  })

  it('a text of only signal characters is pressed without Enter, even with submit, at the shell’s prompt too', () => {
    for (const modes of [normal, { ...normal, bracketedPaste: true, shellPrompt: true }]) {
      expect(planInput({ text: '\x03', submit: true }, modes).steps).toEqual([{ data: '\x03', afterConsumed: false, echo: '' }])
      expect(planInput({ text: '\x1c\x1a', submit: true }, modes).steps.map((step) => step.data)).toEqual(['\x1c', '\x1a'])
    }
  })

  it('keys are one step each, every one after the previous was consumed, named keys carried for encoding at write time', () => {
    const plan = planInput({ keys: ['Up', { text: 'ls' }, 'q', 'Enter'], submit: true }, { ...normal, applicationCursor: true })
    expect(plan.steps.map((step) => [step.data, step.afterConsumed, step.echo])).toEqual([
      ['\x1bOA', false, ''],
      ['ls', true, 'ls'],
      ['q', true, 'q'],
      ['\r', true, ''],
    ])
    expect(plan.steps[0]!.key).toMatchObject({ kind: 'named', name: 'Up' })
    expect(plan.steps[1]!.key).toBeUndefined()
    expect(plan).toMatchObject({ inputText: '', lines: '\rlsq\r' })
  })

  it('a secret is its value, then Enter as its own key press, and is named for redaction', () => {
    const plan = planInput({ secret: { name: 'DEMO', value: 'correct-horse' }, submit: false }, normal)
    expect(plan.steps.map((step) => [step.data, step.afterConsumed])).toEqual([
      ['correct-horse', false],
      ['\r', true],
    ])
    expect(plan.secret).toEqual({ name: 'DEMO', value: 'correct-horse' })
  })
})
