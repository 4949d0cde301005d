/**
 * The test project list. Vitest 4 reads only `test.projects`, so vitest.config.ts imports
 * this list. Every package folder is its own project (named after its package.json) for its
 * `*.test.ts` files, which may run real processes; every `*.unit.test.ts` file, in any package or
 * under tests/, is in the `unit` project (`pnpm test:unit`), whose setup file fails a test that
 * starts a process. The snapshot suites under examples/ form the `snapshot` project
 * (`pnpm test:snapshot`), and the other checks of the whole workspace under tests/ form the
 * `workspace` project.
 *
 * The package projects are written out inline with `extends: true`: a project Vitest finds
 * from a folder glob does not inherit the root config, so it would run with Vitest's 5 s
 * test budget instead of the root's.
 */
import { existsSync, readdirSync, readFileSync } from 'node:fs'
import { join } from 'node:path'
import { configDefaults } from 'vitest/config'

/** Group folders hold no package.json; each package inside one is a project. */
const GROUPS = ['core', 'tasks', 'subprocess', 'sandbox', 'pty', 'acp', 'ptc', 'subagent', 'pool']

function packageFolders(): string[] {
  const folders: string[] = []
  for (const group of GROUPS) {
    const dir = join('packages', group)
    if (!existsSync(dir)) continue
    for (const entry of readdirSync(dir, { withFileTypes: true })) {
      if (entry.isDirectory() && existsSync(join(dir, entry.name, 'package.json'))) folders.push(join(dir, entry.name))
    }
  }
  return [...folders.sort(), 'packages/cli', 'packages/test-support']
}

function packageProject(folder: string) {
  const { name } = JSON.parse(readFileSync(join(folder, 'package.json'), 'utf8')) as { name: string }
  return { extends: true as const, test: { name, root: `./${folder}`, exclude: [...configDefaults.exclude, UNIT] } }
}

/** Fast tests: pure, no process, no bubblewrap, no pty. */
const UNIT = '**/*.unit.test.ts'

export const projects = [
  ...packageFolders().map(packageProject),
  {
    extends: true as const,
    test: {
      name: 'unit',
      root: './',
      include: [`packages/${UNIT}`, `tests/${UNIT}`],
      setupFiles: ['./packages/test-support/src/unit-guard.ts'],
    },
  },
  { extends: true as const, test: { name: 'workspace', root: './', include: ['tests/**/*.test.ts'], exclude: [...configDefaults.exclude, UNIT] } },
  {
    test: {
      name: 'snapshot',
      root: './examples',
      include: ['**/*.snapshot.test.ts'],
      testTimeout: 120_000,
      hookTimeout: 60_000,
    },
  },
]

export default projects
