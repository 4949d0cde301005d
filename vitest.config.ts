import { defineConfig } from 'vitest/config'
import { projects } from './vitest.workspace.ts'

export default defineConfig({
  test: {
    projects,
    // Real-process tests spawn shells and REPLs; two cores are the norm here, so keep the
    // file-level parallelism modest and the per-test budget generous.
    maxWorkers: 2,
    testTimeout: 60_000,
    hookTimeout: 30_000,
  },
})
