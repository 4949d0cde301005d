import { execFile } from 'node:child_process'

/** Runs a probe argv once; resolves `true` on exit status 0, else the reason in one line. */
export type ProbeRunner = (argv: [string, ...string[]], timeoutMs: number) => Promise<true | string>

/**
 * The real probe runner: execFile(3) with a timeout (SIGKILL on expiry). Reasons name the
 * program: `bwrap was not found on PATH`, `/x/bwrap was not found`, `bwrap failed (exit 1):
 * bwrap: No permissions to create new namespace…`, `bwrap did not finish within 10000 ms`.
 */
export const runProbe: ProbeRunner = (argv, timeoutMs) =>
  new Promise((resolve) => {
    const [program, ...args] = argv
    execFile(program, args, { timeout: timeoutMs, killSignal: 'SIGKILL', encoding: 'utf8' }, (error, _stdout, stderr) => {
      if (!error) return resolve(true)
      const code = (error as NodeJS.ErrnoException).code
      if (code === 'ENOENT') {
        return resolve(program.includes('/') ? `${program} was not found` : `${program} was not found on PATH`)
      }
      if (code === 'EACCES') return resolve(`${program} is not executable`)
      if ((error as { killed?: boolean }).killed) return resolve(`${program} did not finish within ${timeoutMs} ms`)
      const detail = stderr.trim().split('\n').slice(0, 3).join(' / ')
      const status = typeof error.code === 'number' ? `exit ${error.code}` : (error.signal ?? 'failed')
      resolve(`${program} failed (${status})${detail ? `: ${detail}` : ''}`)
    })
  })
