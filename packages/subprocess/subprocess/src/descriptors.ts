/**
 * Closing the descriptors a child would inherit: those conch itself inherited
 * (`conch run 200<~/.ssh/key`) and those native modules open without close-on-exec (node-pty's
 * masters) would let a confined program read a masked file or type into another terminal. Node
 * has no fcntl(2), so a small shell closes them between fork and the program's exec.
 */
import { existsSync } from 'node:fs'

/**
 * The shell, with its flags, that runs a `-c` script on the host: bash when it is there (it can
 * close descriptors above 9), else the POSIX sh (dash redirects single-digit descriptors only).
 * bash reads no startup file so: not ~/.bashrc (Debian's bash sources it when stdin is a socket,
 * as Node's pipes are), not $BASH_ENV (ignored in POSIX mode; a relative one names a file in the
 * working directory, a workspace), and a function cannot stand in for `exec` (a special builtin,
 * in POSIX mode).
 */
export function descriptorShell(): [string, ...string[]] {
  return existsSync('/bin/bash') ? ['/bin/bash', '--norc', '--noprofile', '--posix'] : ['/bin/sh']
}

/**
 * A shell command that closes every open descriptor from `keep` up (0 … keep-1 stay open).
 * `/dev/fd` lists the open descriptors (Linux and macOS); the one the listing itself used is
 * gone by the time it is tested.
 */
export function closeDescriptorsCommand(keep: number): string {
  const kept = Array.from({ length: keep }, (_, fd) => fd).join('|')
  return (
    `for __conch_fd in /dev/fd/*; do __conch_fd=\${__conch_fd##*/}; ` +
    `case \$__conch_fd in ${kept}) continue ;; ? ) ;; *) [ -n "\$BASH_VERSION" ] || continue ;; esac; ` +
    `[ -e "/dev/fd/\$__conch_fd" ] && eval "exec \$__conch_fd>&-"; done`
  )
}

/**
 * `argv` started through the shell that first closes every descriptor from `keep` up, then execs
 * it through env(1), which takes out the `PWD`, `SHLVL` and `_` the shell adds, so the program
 * gets exactly `env`.
 */
export function withDescriptorsClosed(
  argv: readonly [string, ...string[]],
  keep: number,
  env: Readonly<Record<string, string | undefined>>,
): [string, ...string[]] {
  const restored = SHELL_VARIABLES.flatMap((name) => (env[name] === undefined ? [] : [`${name}=${env[name]}`]))
  const unset = SHELL_VARIABLES.map((name) => `-u ${name}`).join(' ')
  return [...descriptorShell(), '-c', `${closeDescriptorsCommand(keep)}; exec /usr/bin/env ${unset} "$@"`, 'conch-spawn', ...restored, ...argv]
}

/** What bash (and dash, `PWD`) export to a program they exec although its environment lacked them. */
const SHELL_VARIABLES = ['PWD', 'SHLVL', '_'] as const
