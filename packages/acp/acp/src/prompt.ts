/**
 * Turning the content blocks of a `session/prompt` into the text of the user message.
 *
 * ACP (prompt-turn, "User Message"; initialization, "Prompt Capabilities"): every agent
 * accepts `text` and `resource_link` blocks; `resource` (embedded context) only when it
 * advertises `embeddedContext` — conch does, for text resources; `image` and `audio` only
 * when advertised — conch does not.
 */
import type { ContentBlock } from '@agentclientprotocol/sdk'
import { AcpError } from './errors.ts'

/** What conch advertises as `promptCapabilities` (kept next to the code that honours it). */
export const PROMPT_CAPABILITIES = { image: false, audio: false, embeddedContext: true } as const

/**
 * The user message for `blocks`: text and resource links read inline, in order (a link as
 * `[name](uri)`); each embedded text resource is linked inline the same way and its contents
 * follow the message, one fenced block per resource:
 *
 * ```
 * explain [main.py](file:///work/main.py)
 *
 * file:///work/main.py:
 * ~~~
 * print("hi")
 * ~~~
 * ```
 *
 * @throws AcpError `UNSUPPORTED_CONTENT` for image, audio and binary resource blocks;
 *   `EMPTY_PROMPT` when nothing but whitespace is left.
 */
export function promptText(blocks: readonly ContentBlock[]): string {
  let inline = ''
  const attached: string[] = []
  blocks.forEach((block, index) => {
    switch (block.type) {
      case 'text':
        inline += block.text
        break
      case 'resource_link':
        inline += `[${block.title ?? block.name}](${block.uri})`
        break
      case 'resource': {
        const { resource } = block
        if (!('text' in resource)) {
          throw new AcpError(
            'UNSUPPORTED_CONTENT',
            `prompt[${index}] embeds a binary resource (${resource.uri}); conch reads text only — send a resource_link or text instead`,
            { index, type: block.type },
          )
        }
        inline += `[${lastSegment(resource.uri)}](${resource.uri})`
        attached.push(`${resource.uri}:\n${fence(resource.text)}`)
        break
      }
      case 'image':
      case 'audio':
        throw new AcpError(
          'UNSUPPORTED_CONTENT',
          `prompt[${index}] is ${block.type} content, which conch does not accept (promptCapabilities.${block.type} is false); send text`,
          { index, type: block.type },
        )
      default: {
        const never: never = block
        throw new AcpError('UNSUPPORTED_CONTENT', `prompt[${index}] has an unknown content type ${JSON.stringify((never as { type?: unknown }).type)}; send text`, {
          index,
        })
      }
    }
  })
  const text = [inline.trim(), ...attached].filter((part) => part !== '').join('\n\n')
  if (text === '') throw new AcpError('EMPTY_PROMPT', 'the prompt has no text; send at least one non-empty text block')
  return text
}

function lastSegment(uri: string): string {
  const trimmed = uri.replace(/\/+$/, '')
  const slash = trimmed.lastIndexOf('/')
  return slash === -1 ? trimmed : trimmed.slice(slash + 1) || trimmed
}

/** A fence longer than any run of `~` in the text (CommonMark §4.5), so the contents cannot close it. */
function fence(text: string): string {
  const longest = Math.max(2, ...[...text.matchAll(/~+/g)].map((match) => match[0].length))
  const marker = '~'.repeat(longest + 1)
  return `${marker}\n${text.endsWith('\n') ? text : `${text}\n`}${marker}`
}
