/** The generic kind's stand-in CLI for the pool tests. */
import { chmodSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'

/**
 * Writes an executable REPL of the generic kind into `dir`: it prints `> `, reads a line and
 * answers `echo: <line>` between two `$POOL_SENTINEL` lines; a line with STALL gets no answer.
 * Returns its path.
 */
export function sentinelRepl(dir: string): string {
  const repl = join(dir, 'repl.sh')
  writeFileSync(repl, `#!/bin/sh
printf '> '
while IFS= read -r line; do
  case "$line" in *STALL*) continue ;; esac
  printf '%s\\n%s\\n%s\\n> ' "$POOL_SENTINEL" "echo: $line" "$POOL_SENTINEL"
done
`)
  chmodSync(repl, 0o755)
  return repl
}
