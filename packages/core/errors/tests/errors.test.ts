import { describe, expect, it } from 'vitest'
import { ConchError, describeExit, errorClass, messageOf } from '../src/index.ts'

const ExampleError = errorClass('ExampleError', {
  NO_THING: (d: { id: string }) => `unknown thing ${d.id}`,
  TOO_MANY: (d: { held: number; max: number }) => `${d.held} things held, more than ${d.max}`,
})

describe('errorClass', () => {
  it('builds the message from the code and its details, and keeps the cause', () => {
    const cause = new Error('underneath')
    const error = new ExampleError('NO_THING', { id: 'thing-7' }, { cause })
    expect(error).toBeInstanceOf(ExampleError)
    expect(error).toBeInstanceOf(ConchError)
    expect(error).toBeInstanceOf(Error)
    expect(error).toMatchObject({ name: 'ExampleError', code: 'NO_THING', details: { id: 'thing-7' }, message: 'unknown thing thing-7', cause })
    expect(ExampleError.name).toBe('ExampleError')
    expect(ExampleError.message('TOO_MANY', { held: 3, max: 2 })).toBe('3 things held, more than 2')
  })
})

describe('messageOf and describeExit', () => {
  it('reads any thrown value and any exit the same way everywhere', () => {
    expect(messageOf(new Error('boom'))).toBe('boom')
    expect(messageOf(new TypeError(''))).toBe('TypeError')
    expect(messageOf('plain')).toBe('plain')
    expect(describeExit({ exitCode: 3, signal: null })).toBe('exited with code 3')
    expect(describeExit({ exitCode: null, signal: 'SIGHUP' })).toBe('was killed by SIGHUP')
    expect(describeExit({ exitCode: null, signal: null })).toBe('exited with code unknown')
    expect(describeExit({ state: 'running' })).toBe('is running')
  })
})
