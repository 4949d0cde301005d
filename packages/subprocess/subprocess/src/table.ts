import { linuxProcessTable } from './table-linux.ts'
import { macosProcessTable } from './table-macos.ts'
import { SubprocessError, type ProcessTable } from './types.ts'

/**
 * The process table for `process.platform`: /proc on Linux, ps(1) on macOS and the BSDs
 * (whose ps has the same keywords).
 * @throws SubprocessError `UNSUPPORTED_PLATFORM` on Windows and other platforms without either.
 */
export function defaultProcessTable(): ProcessTable {
  switch (process.platform) {
    case 'linux':
    case 'android':
      return linuxProcessTable()
    case 'darwin':
    case 'freebsd':
    case 'openbsd':
    case 'netbsd':
      return macosProcessTable()
    default:
      throw new SubprocessError('UNSUPPORTED_PLATFORM', { platform: process.platform })
  }
}
