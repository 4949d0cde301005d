#!/usr/bin/env bash
# Sets up a clone for conch: pnpm 10.34.9 (under .tools/ unless that exact version is on
# PATH), the workspace dependencies (node-pty builds natively against Node's headers), and
# bubblewrap for sandboxed terminals and, as root, busybox-static (apt-get, when running as root
# on Debian or Ubuntu).
# Safe to run again: every step is skipped when already done.
#
# Source it (`. scripts/setup.sh`) to get `pnpm` on PATH afterwards.
set -euo pipefail
conch_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$conch_root"

pnpm_version=10.34.9
node_major="$(node -p 'process.versions.node.split(".")[0]')"
if [ "$node_major" -lt 20 ]; then
  echo "conch needs Node.js 20 or newer (found $(node --version))." >&2
  exit 1
fi

if [ "$(pnpm --version 2>/dev/null || true)" != "$pnpm_version" ]; then
  if [ "$(.tools/node_modules/.bin/pnpm --version 2>/dev/null || true)" != "$pnpm_version" ]; then
    echo "== installing pnpm $pnpm_version into .tools/" >&2
    npm install --prefix .tools --no-audit --no-fund --loglevel=error "pnpm@$pnpm_version" >&2
  fi
  export PATH="$conch_root/.tools/node_modules/.bin:$PATH"
fi

# As root, an agent's later processes join its network namespace through busybox-static's sh and
# nsenter (static programs: no shared library loaded on the way; util-linux's stays the fallback).
sandbox_packages=()
if [ "$(uname -s)" = Linux ]; then
  command -v bwrap >/dev/null 2>&1 || sandbox_packages+=(bubblewrap)
  [ "$(id -u)" != 0 ] || command -v busybox >/dev/null 2>&1 || sandbox_packages+=(busybox-static)
fi
if [ "${#sandbox_packages[@]}" -gt 0 ]; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    echo "== installing ${sandbox_packages[*]} (apt-get)" >&2
    (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${sandbox_packages[@]}") >&2
  elif ! command -v bwrap >/dev/null 2>&1; then
    echo "note: bubblewrap (bwrap) is not installed; sandboxed terminals will refuse to open." >&2
    echo "      install it (sudo apt-get install bubblewrap), or choose danger-full-access in cordis.yml." >&2
  fi
fi

echo "== installing dependencies (pnpm install)" >&2
pnpm install --frozen-lockfile --reporter=append-only >&2

# The conch bin runs this build while it matches the sources (see scripts/build-bin.mjs).
echo "== building the conch bin (packages/cli/dist)" >&2
node scripts/build-bin.mjs >&2
