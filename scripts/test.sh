#!/usr/bin/env bash
# Sets up the clone (scripts/setup.sh) and runs the whole test suite: type checks, unit and
# real-process tests, and the snapshot suites.
set -euo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/setup.sh"
pnpm test
