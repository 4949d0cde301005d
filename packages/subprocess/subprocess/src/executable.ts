/** Finding a program as execvp(3) does, so that a missing one fails by name before anything starts. */
import { accessSync, constants, statSync } from 'node:fs'
import { join } from 'node:path'

/** Whether `file` is a regular file this process may execute (access(2) `X_OK`). */
export function isExecutableFile(file: string): boolean {
  try {
    if (!statSync(file).isFile()) return false
    accessSync(file, constants.X_OK)
    return true
  } catch {
    return false
  }
}

/** The first `<dir>/<name>` of `dirs` that is an executable file, or undefined. */
export function findExecutable(name: string, dirs: readonly string[]): string | undefined {
  return dirs.map((dir) => join(dir, name)).find(isExecutableFile)
}
