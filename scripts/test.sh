#!/usr/bin/env bash
# Sets up the clone (scripts/setup.sh) and runs the whole test suite: type checks, unit and
# real-process tests, and the snapshot suites. The sub-agent tests drive the real Codex and Claude
# Code binaries, which only this path installs (scripts/install-products.sh, into .products/), and
# real terminal programs a fresh machine may lack (scripts/install-test-tools.sh). The container
# tests run against dockerd (scripts/start-dockerd.sh) in an image built here without a registry
# (scripts/build-test-image.sh); where either cannot run, those tests say why and skip.
set -euo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/setup.sh"
./scripts/install-test-tools.sh
./scripts/install-products.sh
./scripts/start-dockerd.sh && ./scripts/build-test-image.sh || echo 'note: the container tests will skip (see above)' >&2
pnpm test
