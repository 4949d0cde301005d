/**
 * The setup file of the `unit` test project (`*.unit.test.ts`, `pnpm test:unit`). A unit test
 * starts no process: every way to start one here — `node:child_process` and node-pty — is
 * replaced by a function that records the attempt and throws, and a test that tried fails
 * afterwards even if it caught the throw. A file that needs a real process is a `*.test.ts`.
 */
import childProcess from 'node:child_process'
import { createRequire, syncBuiltinESMExports } from 'node:module'
import { afterEach } from 'vitest'

const attempts: string[] = []

function refuse(what: string) {
  return (...args: unknown[]): never => {
    const command = typeof args[0] === 'string' ? args[0] : String(args[0])
    attempts.push(`${what}(${JSON.stringify(command)})`)
    throw new Error(`UNIT_TEST_STARTED_PROCESS: a *.unit.test.ts file called ${what}(${JSON.stringify(command)}); a test that needs a real process is named *.test.ts`)
  }
}

const spawners = ['spawn', 'spawnSync', 'exec', 'execSync', 'execFile', 'execFileSync', 'fork'] as const
for (const name of spawners) (childProcess as unknown as Record<string, unknown>)[name] = refuse(`child_process.${name}`)
syncBuiltinESMExports()

// node-pty is pty-local's dependency; its module object is what `import('node-pty')` hands back.
const fromPtyLocal = createRequire(new URL('../../pty/pty-local/package.json', import.meta.url))
;(fromPtyLocal('node-pty') as Record<string, unknown>)['spawn'] = refuse('node-pty.spawn')

afterEach(() => {
  const tried = attempts.splice(0)
  if (tried.length > 0) throw new Error(`UNIT_TEST_STARTED_PROCESS: this unit test tried ${tried.join(', ')}; a test that needs a real process is named *.test.ts`)
})
