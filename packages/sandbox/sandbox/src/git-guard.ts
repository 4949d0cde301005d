/**
 * A repository's `.git/config` can name programs git runs on its own (hooks, fsmonitor, a
 * credential helper, an ssh command). Every confined process starts with these keys set through
 * git's environment configuration (git-config(1) `GIT_CONFIG_COUNT`), whose command scope wins
 * over every config file.
 */

/** A failing `core.sshCommand` that says why (git appends the ssh arguments; `#` makes them a comment). */
const SSH_DISABLED = `echo 'git over ssh is disabled in the sandbox (core.sshCommand); use an https remote' >&2; exit 128 #`

/** The keys set for every confined process, in order, and their values. */
export const GIT_NEUTRALISED: ReadonlyArray<readonly [key: string, value: string]> = [
  // No hook runs: /dev/null is no folder, so no hook is found in it.
  ['core.hooksPath', '/dev/null'],
  ['core.fsmonitor', 'false'],
  // An empty helper resets the list of helpers configured before it (gitcredentials(7)).
  ['credential.helper', ''],
  ['core.sshCommand', SSH_DISABLED],
]

const quote = (text: string): string => `'${text.replaceAll("'", `'\\''`)}'`

/**
 * POSIX sh commands, for a provider's launcher, that append `GIT_NEUTRALISED` after the caller's
 * own `GIT_CONFIG_*` entries (git uses the last entry of a key: ours) and set
 * `GIT_TERMINAL_PROMPT=0`. A count that is not a plain decimal number restarts at 0.
 */
export function gitGuardScript(): string {
  const entries = GIT_NEUTRALISED.map(
    ([key, value]) => `export "GIT_CONFIG_KEY_$n=${key}" "GIT_CONFIG_VALUE_$n="${quote(value)}; n=$((n + 1)); `,
  ).join('')
  return `n=\${GIT_CONFIG_COUNT:-0}; case $n in *[!0-9]*|0?*) n=0;; esac; ${entries}export GIT_CONFIG_COUNT=$n GIT_TERMINAL_PROMPT=0; `
}
