/**
 * The scripted-model format (packages/core/llm-replay/README.md): JSON Lines, one
 * line per model call, consumed in order:
 * `{"text"?: string, "tool_calls"?: [{"name": string, "arguments": object}]}`.
 */
import { readFileSync } from 'node:fs'
import { z } from 'zod'
import { LlmError } from '@conch/llm'

const ScriptLine = z.strictObject({
  text: z.string().optional(),
  tool_calls: z
    .array(
      z.strictObject({
        name: z.string().min(1),
        arguments: z.record(z.string(), z.unknown()),
      }),
    )
    .optional(),
})

/** One model call of a script. */
export interface ScriptStep {
  /** 1-based line number in the file (blank lines count). */
  line: number
  text: string
  toolCalls: { name: string; arguments: Record<string, unknown> }[]
}

/**
 * Parses a script. Blank lines are skipped; every other line must be a JSON object with only
 * `text` (string) and `tool_calls` (array of `{name, arguments: object}`), and at least one of them.
 * Every line is checked, so one run names every line to fix.
 * @throws LlmError `SCRIPT_ERROR` with the message `<file>:<line>: <what is wrong>`, and the other
 *   wrong lines in `also` (the message names the first three).
 */
export function parseScript(text: string, file: string): ScriptStep[] {
  const steps: ScriptStep[] = []
  const wrong: { line: number; problem: string }[] = []
  const lines = text.split('\n')
  for (let index = 0; index < lines.length; index++) {
    const source = lines[index]!.trim()
    if (source === '') continue
    const line = index + 1
    const problem = problemOf(source)
    if (typeof problem === 'string') wrong.push({ line, problem })
    else steps.push({ line, ...problem })
  }
  const [first, ...also] = wrong
  if (first !== undefined) throw new LlmError('SCRIPT_ERROR', { file, ...first, ...(also.length > 0 && { also }) })
  if (steps.length === 0) throw new LlmError('SCRIPT_ERROR', { file, problem: 'the script has no lines; write one JSON object per model call' })
  return steps
}

/** A line's reply, or what is wrong with it. */
function problemOf(source: string): Omit<ScriptStep, 'line'> | string {
  let value: unknown
  try {
    value = JSON.parse(source)
  } catch (error) {
    return `not valid JSON (${(error as Error).message})`
  }
  const parsed = ScriptLine.safeParse(value)
  if (!parsed.success) {
    const issues = parsed.error.issues.map((issue) => {
      const path = issue.path.length ? issue.path.map(String).join('.') : 'the line'
      return `${path}: ${issue.message}`
    })
    return `${issues.join('; ')} (expected {"text"?: string, "tool_calls"?: [{"name": string, "arguments": object}]})`
  }
  const { text: reply, tool_calls: toolCalls } = parsed.data
  if (reply === undefined && toolCalls === undefined) return 'the line has neither "text" nor "tool_calls"'
  return { text: reply ?? '', toolCalls: toolCalls ?? [] }
}

/** Reads and parses `path`; `file` is how messages name it. */
export function readScript(path: string, file: string = path): ScriptStep[] {
  let text: string
  try {
    text = readFileSync(path, 'utf8')
  } catch (error) {
    throw new LlmError('SCRIPT_ERROR', { file, unreadable: (error as Error).message }, { cause: error })
  }
  return parseScript(text, file)
}
