/**
 * The folders and programs of the machine a test runs on: temporary homes that nothing outlives,
 * and whether a program the test drives is installed.
 */
import { spawnSync } from 'node:child_process'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterEach } from 'vitest'

/**
 * A maker of temporary folders named `<prefix>XXXXXX` in `parent` (default the system's tmpdir;
 * `/var/tmp` for a state home a sandboxed terminal must not see as its private /tmp). Call it at
 * a test file's top level: every folder made during a test is removed after that test.
 */
export function tempFolders(prefix: string, parent = tmpdir()): () => string {
  const made: string[] = []
  afterEach(() => {
    for (const dir of made.splice(0)) rmSync(dir, { recursive: true, force: true })
  })
  return () => {
    const dir = mkdtempSync(join(parent, prefix))
    made.push(dir)
    return dir
  }
}

/** Whether `program` is on PATH (`command -v`). */
export function onPath(program: string): boolean {
  return spawnSync('sh', ['-c', `command -v ${program}`], { stdio: 'ignore' }).status === 0
}
