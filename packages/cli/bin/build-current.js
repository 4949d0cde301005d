// The freshness check of the built bin (build-current.cjs), for ES modules: the tests and the
// startup benchmark.
import { createRequire } from 'node:module'

const { buildIsCurrent, currentBuild } = createRequire(import.meta.url)('./build-current.cjs')

export { buildIsCurrent, currentBuild }
