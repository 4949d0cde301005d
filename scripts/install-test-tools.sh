#!/usr/bin/env bash
# Installs the terminal programs the real-program tests drive that a fresh Debian machine may
# lack: dialog and htop (screen tests), vim (editor tests), gdb, sqlite3, bc and ed (readiness
# tests), a JDK for jshell, iproute2 (network-namespace peers), ipython3 (a prompt_toolkit
# REPL), docker.io and curl (the sandbox's socket tests attack a real dockerd, which
# scripts/start-dockerd.sh starts; debootstrap builds the container tests' image,
# scripts/build-test-image.sh), tmux (the reference terminal of the differential screen
# tests), and git, less, python3, procps (top), bsdutils (script) and
# util-linux (nsenter) and mount (mount, umount: the agent sandbox pins its network namespace),
# which slimmer images leave out. Only the test path
# (scripts/test.sh) runs it; apt-get, when run as root, and only for what is missing.
# Elsewhere it names what to install, and the tests that need a missing program say so.
set -euo pipefail
missing=()
need() { command -v "$1" >/dev/null 2>&1 || missing+=("$2"); }
need dialog dialog
need htop htop
need vim vim
need gdb gdb
need sqlite3 sqlite3
need bc bc
need ed ed
need jshell default-jdk-headless
need ip iproute2
need ipython3 ipython3
need git git
need less less
need python3 python3
need top procps
need script bsdutils
need nsenter util-linux
need umount mount
need dockerd docker.io
need debootstrap debootstrap
need curl curl
need tmux tmux
[ "${#missing[@]}" -eq 0 ] && exit 0
if [ "$(uname -s)" = Linux ] && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
  echo "== installing test programs (apt-get): ${missing[*]}" >&2
  (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}") >&2
else
  echo "note: the real-program tests want these packages: ${missing[*]}" >&2
fi
