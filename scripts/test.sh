#!/usr/bin/env bash
# Sets up the clone (scripts/setup.sh) and runs the whole test suite: type checks, unit and
# real-process tests, and the snapshot suites. The sub-agent tests drive the real Codex and Claude
# Code binaries, which only this path installs (scripts/install-products.sh, into .products/), and
# real terminal programs a fresh machine may lack (scripts/install-test-tools.sh).
set -euo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/setup.sh"
./scripts/install-test-tools.sh
./scripts/install-products.sh
pnpm test
