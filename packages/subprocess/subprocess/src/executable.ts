/** Finding a program as execvp(3) does, so that a missing one fails by name before anything starts. */
import { accessSync, constants, statSync } from 'node:fs'
import { delimiter, isAbsolute, join } from 'node:path'

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

/**
 * `command` as an executable file: itself when it names one by a path (a `/` in it), else its
 * first match in the absolute folders of `path` (a PATH string, or its folders). execvp(3)'s
 * search without the relative and empty entries, which name the working directory: the
 * workspace, where a repository could carry a program of that name. Undefined when none.
 */
export function resolveExecutable(command: string, path: string | readonly string[]): string | undefined {
  if (command.includes('/')) return isExecutableFile(command) ? command : undefined
  const folders = typeof path === 'string' ? path.split(delimiter) : path
  return findExecutable(command, folders.filter((folder) => isAbsolute(folder)))
}
