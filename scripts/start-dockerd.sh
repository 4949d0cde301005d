#!/usr/bin/env bash
# Starts dockerd (Debian's docker.io, installed by scripts/install-test-tools.sh) when its socket
# does not answer, for the tests that attack a daemon's socket from inside the sandbox. Idempotent:
# a daemon that answers is left alone. It runs in the background, logs to
# ${TMPDIR:-/tmp}/conch-dockerd.log, and the script waits (at most 60 s) until GET /_ping answers.
# Exits 0 when the socket answers, 1 (saying why) when dockerd is missing, not root, or silent.
set -euo pipefail
socket=/run/docker.sock
ping() { curl -fsS --max-time 2 --unix-socket "$socket" http://localhost/_ping >/dev/null 2>&1; }
ping && exit 0
command -v dockerd >/dev/null 2>&1 || { echo "start-dockerd: dockerd is not installed (apt-get install docker.io)" >&2; exit 1; }
[ "$(id -u)" = 0 ] || { echo "start-dockerd: dockerd needs root" >&2; exit 1; }
log="${TMPDIR:-/tmp}/conch-dockerd.log"
if ! pgrep -x dockerd >/dev/null 2>&1; then
  setsid dockerd >>"$log" 2>&1 </dev/null &
fi
for _ in $(seq 1 300); do
  ping && exit 0
  sleep 0.2
done
echo "start-dockerd: $socket did not answer within 60 s; see $log" >&2
exit 1
