/**
 * The headless-agent snapshot suite: each folder under scenarios/ is a `conch run --output
 * stream-json` run with the scripted model, compared (after normalisation) with its
 * `stream-json.expected.jsonl`. The pinned scenario (memory terminals) also pins what the model
 * is offered: `tool-schemas.expected.json` and `system-prompt.expected.md`.
 *
 * `pnpm test:snapshot` compares; `pnpm test:snapshot:update` rewrites the expectations.
 */
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { describe, expect, it } from 'vitest'
import { jsonLines, matchExpectation, modelView, Normaliser, processesIn, readHeadlessInput, runHeadless, scenarios } from '@conch/test-support/snapshot'

const here = dirname(fileURLToPath(import.meta.url))
const SCENARIOS = join(here, 'scenarios')

describe('headless-agent', () => {
  for (const name of scenarios(SCENARIOS)) {
    it(`${name}: conch run prints the expected stream-json transcript and leaves no process behind`, async () => {
      const dir = join(SCENARIOS, name)
      const input = readHeadlessInput(dir)
      const workspace = mkdtempSync(join(tmpdir(), 'conch-snapshot-'))
      try {
        const run = await runHeadless({ exampleDir: here, scenarioDir: dir, input, workspace })
        expect(run.code, run.stderr).toBe(input.exitCode)
        expect(run.lines.at(-1)?.['type']).toBe('result')
        expect(processesIn(workspace)).toEqual([])
        const normaliser = new Normaliser({ kind: input.kind, workspaces: [workspace] })
        matchExpectation(join(dir, 'stream-json.expected.jsonl'), jsonLines(run.lines.map((line) => normaliser.value(line))))

        if (input.kind === 'pinned') {
          const view = await modelView({ config: join(here, input.config), script: join(dir, 'script.jsonl'), workspace })
          expect(view.tools.filter((tool) => tool.name.startsWith('terminal_')).map((tool) => tool.name)).toEqual([
            'terminal_close',
            'terminal_list',
            'terminal_open',
            'terminal_read',
            'terminal_resize',
            'terminal_send',
            'terminal_signal',
          ])
          matchExpectation(join(dir, 'tool-schemas.expected.json'), `${JSON.stringify(normaliser.value(view.tools), null, 2)}\n`)
          matchExpectation(join(dir, 'system-prompt.expected.md'), `${normaliser.text(view.systemPrompt)}\n`)
        }
      } finally {
        rmSync(workspace, { recursive: true, force: true })
      }
    })
  }
})
