/**
 * The test project list. Vitest 4 reads only `test.projects`, so vitest.config.ts imports
 * this list. Every package folder is its own project (named after its package.json), and
 * the snapshot suites under examples/ form the `snapshot` project (`pnpm test:snapshot`), and
 * the checks of the whole workspace under tests/ form the `workspace` project.
 *
 * The package projects are written out inline with `extends: true`: a project Vitest finds
 * from a folder glob does not inherit the root config, so it would run with Vitest's 5 s
 * test budget instead of the root's.
 */
import { existsSync, readdirSync, readFileSync } from 'node:fs'
import { join } from 'node:path'

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
  return [...folders.sort(), 'packages/cli']
}

function packageProject(folder: string) {
  const { name } = JSON.parse(readFileSync(join(folder, 'package.json'), 'utf8')) as { name: string }
  return { extends: true as const, test: { name, root: `./${folder}` } }
}

export const projects = [
  ...packageFolders().map(packageProject),
  { extends: true as const, test: { name: 'workspace', root: './', include: ['tests/**/*.test.ts'] } },
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
