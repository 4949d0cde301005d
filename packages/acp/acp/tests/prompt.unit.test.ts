import { describe, expect, it } from 'vitest'
import { AcpError, promptText } from '../src/index.ts'

function error(run: () => unknown): AcpError {
  try {
    run()
  } catch (caught) {
    expect(caught).toBeInstanceOf(AcpError)
    return caught as AcpError
  }
  throw new Error('expected an AcpError')
}

describe('promptText', () => {
  it('joins text blocks as written and links resource_link blocks inline', () => {
    expect(
      promptText([
        { type: 'text', text: 'explain ' },
        { type: 'resource_link', uri: 'file:///work/main.py', name: 'main.py' },
        { type: 'text', text: ' briefly' },
      ]),
    ).toBe('explain [main.py](file:///work/main.py) briefly')
  })

  it('links an embedded text resource inline and appends its contents in a fence it cannot close', () => {
    const text = promptText([
      { type: 'text', text: 'why does this fail? ' },
      { type: 'resource', resource: { uri: 'file:///work/notes.md', text: 'a ~~~ b\n~~~~\n' } },
    ])
    expect(text).toBe('why does this fail? [notes.md](file:///work/notes.md)\n\nfile:///work/notes.md:\n~~~~~\na ~~~ b\n~~~~\n~~~~~')
  })

  it('refuses image, audio and binary resources naming the block', () => {
    expect(error(() => promptText([{ type: 'text', text: 'see' }, { type: 'audio', data: 'AA', mimeType: 'audio/wav' }])).message).toBe(
      'prompt[1] is audio content, which conch does not accept (promptCapabilities.audio is false); send text',
    )
    const binary = error(() => promptText([{ type: 'resource', resource: { uri: 'file:///a.bin', blob: 'AA' } }]))
    expect(binary.errorCode).toBe('UNSUPPORTED_CONTENT')
    expect(binary.code).toBe(-32602)
  })

  it('refuses a prompt with nothing but whitespace', () => {
    const empty = error(() => promptText([{ type: 'text', text: '  \n' }]))
    expect(empty.errorCode).toBe('EMPTY_PROMPT')
    expect(empty.data).toEqual({ errorCode: 'EMPTY_PROMPT' })
  })
})
