/**
 * The test project list. Vitest 4 reads only `test.projects`, so vitest.config.ts imports
 * this list. Every package folder is its own project (named after its package.json), and
 * the snapshot suites under examples/ form the `snapshot` project (`pnpm test:snapshot`).
 */
export const projects = [
  // Group folders hold no package.json; each package inside one is a project.
  'packages/{core,tasks,subprocess,sandbox,pty,acp,ptc,subagent,pool}/*/',
  'packages/cli/',
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
