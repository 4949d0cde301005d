#!/usr/bin/env bash
# Installs the agent products the sub-agent tests drive for real — OpenAI Codex and the
# Claude Code binary — at pinned versions into .products/ (git-ignored), with npm.
#
# They are large (each platform binary is about 400 MB), so neither the workspace install
# (scripts/setup.sh) nor the demo downloads them: only the test path (scripts/test.sh) runs
# this script. The providers find the binaries here when their config names no
# `executable` (see packages/subagent/subagent-codex and -claude-code).
#
# Safe to run again: nothing is downloaded when the pinned versions are already in place.
# CONCH_PRODUCTS_DIR overrides the folder.
set -euo pipefail
conch_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
products_dir="${CONCH_PRODUCTS_DIR:-$conch_root/.products}"

codex_version=0.171.0
claude_code_sdk_version=0.3.332

# The Claude Code binary ships as one npm package per platform (the SDK's optional
# dependencies); the workspace installs the SDK's JavaScript without it.
case "$(uname -s)-$(uname -m)" in
  Linux-x86_64) claude_platform=linux-x64 ;;
  Linux-aarch64 | Linux-arm64) claude_platform=linux-arm64 ;;
  Darwin-x86_64) claude_platform=darwin-x64 ;;
  Darwin-arm64) claude_platform=darwin-arm64 ;;
  *)
    echo "install-products: no pinned Claude Code binary for $(uname -s) $(uname -m)" >&2
    exit 1
    ;;
esac
if [ "$claude_platform" != "${claude_platform#linux}" ] && ldd --version 2>&1 | grep -qi musl; then
  claude_platform="$claude_platform-musl"
fi
claude_package="@anthropic-ai/claude-agent-sdk-$claude_platform"

# Claude Code's own sandbox (which the claude-code provider turns on under read-only and
# workspace-write parents) needs bubblewrap and socat on Linux; without them it refuses to start.
if [ "$(uname -s)" = Linux ] && ! command -v socat >/dev/null 2>&1; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    echo "== installing socat (apt-get), for Claude Code's sandbox" >&2
    (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq socat) >&2
  else
    echo "note: socat is not installed; Claude Code sub-agents refuse to start under a sandbox (sudo apt-get install socat)." >&2
  fi
fi

installed_version() {
  node -e 'try { process.stdout.write(require(process.argv[1]).version) } catch {}' \
    "$products_dir/node_modules/$1/package.json" 2>/dev/null || true
}

if [ "$(installed_version @openai/codex)" = "$codex_version" ] &&
  [ "$(installed_version "$claude_package")" = "$claude_code_sdk_version" ]; then
  exit 0
fi

echo "== installing the agent products into ${products_dir#"$conch_root"/} (codex $codex_version, claude code sdk $claude_code_sdk_version; about 850 MB)" >&2
mkdir -p "$products_dir"
cat >"$products_dir/package.json" <<EOF
{
  "private": true,
  "description": "Agent products for conch's sub-agent tests, written by scripts/install-products.sh.",
  "dependencies": {
    "@openai/codex": "$codex_version",
    "$claude_package": "$claude_code_sdk_version"
  }
}
EOF
# The codex wrapper pulls its platform binary as an optional dependency (npm installs only the
# one for this machine); the Claude Code package is that binary alone.
(cd "$products_dir" && npm install --no-audit --no-fund --loglevel=error --no-package-lock) >&2
