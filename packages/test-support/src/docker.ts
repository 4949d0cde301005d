/**
 * What the container tests share: the test image and whether the daemon and the image are
 * there. The daemon is started (scripts/start-dockerd.sh) and the image built
 * (scripts/build-test-image.sh) when they are not; where neither can be, `dockerSkip` says why.
 */
import { spawnSync } from 'node:child_process'
import { join } from 'node:path'
import Docker from 'dockerode'

/** The image the container tests run in (scripts/build-test-image.sh). */
export const TEST_IMAGE = process.env.CONCH_TEST_IMAGE ?? 'conch-test:bookworm'
const scripts = new URL('../../../scripts/', import.meta.url).pathname

/** Why the container tests cannot run here, or undefined when they can (the daemon answers and the image is built). Computed once per test file. */
export const dockerSkip: string | undefined = (() => {
  if (process.platform !== 'linux' || process.getuid?.() !== 0) return 'the container tests run as root on Linux (dockerd needs root)'
  for (const script of ['start-dockerd.sh', 'build-test-image.sh']) {
    const run = spawnSync(join(scripts, script), { encoding: 'utf8', timeout: 240_000, env: { ...process.env, CONCH_TEST_IMAGE: TEST_IMAGE } })
    if (run.status !== 0) return `${script} failed: ${(run.stderr || run.error?.message || '').trim()}`
  }
  return undefined
})()

/** A client of the daemon the tests run against (DOCKER_HOST, else the local socket). */
export const docker = new Docker()
