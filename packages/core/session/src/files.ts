/**
 * Opening session logs without following a path the sandbox could have changed. A confined
 * terminal may be able to write near the log folder (a folder inside its workspace, or one it
 * shares); following a symlink planted there would make the host — often root — create or append
 * a file wherever the link points. The folder is opened from `/` one component at a time, and the
 * log through the folder's descriptor, by `@conch/subprocess`'s `openFolder` / `openFile` (no link
 * followed anywhere, a swap between two steps refused, only a regular file with a single link
 * written); this module restates their refusals as `SessionError`s.
 */
import { BeneathError, openFile, openFolder, type OpenFolder } from '@conch/subprocess'
import { join } from 'node:path'
import { SessionError } from './types.ts'

export type { OpenFolder } from '@conch/subprocess'

/** How a log file is opened: `create` exclusively (a new session), `read` or `append` an existing one. */
export type LogOpenMode = 'create' | 'read' | 'append'

/**
 * Opens the folder `dir` (making what is missing, mode 0700, when `create` is set). The caller closes `fd`.
 * @returns undefined when it is missing and `create` is off.
 * @throws SessionError `LOG_DIR_SYMLINK` naming the symlinked component, `LOG_DIR_INVALID` when a
 *   component is not a folder, the path is not absolute and normalised, or it cannot be opened.
 */
export function openLogDir(dir: string, options: { create: boolean }): OpenFolder | undefined {
  try {
    return openFolder(dir, { create: options.create })
  } catch (error) {
    if (error instanceof BeneathError && error.code === 'PATH_SYMLINK') throw new SessionError('LOG_DIR_SYMLINK', { path: error.details.path }, { cause: error })
    throw new SessionError('LOG_DIR_INVALID', { dir, problem: (error as Error).message }, { cause: error })
  }
}

/**
 * Opens `name` inside `folder` and returns the file descriptor.
 * @throws SessionError `LOG_NOT_REGULAR` (a symlink, FIFO, device, folder or hard link in the log's
 *   place); BeneathError `PATH_EXISTS` for `create` on an existing name; Error `ENOENT`.
 */
export function openLogFile(folder: OpenFolder, name: string, mode: LogOpenMode): number {
  try {
    return openFile(folder, name, mode === 'append' ? 'append-existing' : mode)
  } catch (error) {
    if (error instanceof BeneathError && error.code === 'PATH_NOT_REGULAR') {
      throw new SessionError('LOG_NOT_REGULAR', { file: join(folder.path, name) }, { cause: error })
    }
    throw error
  }
}
