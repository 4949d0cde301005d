#!/usr/bin/env bash
# Builds conch-test:bookworm, the small Debian image the container tests run in, with no
# registry: debootstrap --variant=minbase from the Debian mirror apt already uses here, with the
# programs the tests drive (bash, python3, nodejs, gdb, procps, curl, git), then `docker import`.
# Idempotent: an image that `docker image inspect` answers for is left alone, and concurrent runs
# wait for one build (flock). Needs root,
# debootstrap and a running dockerd (scripts/start-dockerd.sh). Exits 1 saying why otherwise.
set -euo pipefail
image="${CONCH_TEST_IMAGE:-conch-test:bookworm}"
suite=bookworm
packages="bash python3 nodejs gdb procps curl git"
docker image inspect "$image" >/dev/null 2>&1 && exit 0
say() { echo "build-test-image: $*" >&2; }
# Test files that start at once wait for one build instead of each making its own.
exec 9>"${TMPDIR:-/tmp}/conch-test-image.lock"
flock 9
docker image inspect "$image" >/dev/null 2>&1 && exit 0
command -v debootstrap >/dev/null 2>&1 || { say "debootstrap is not installed (apt-get install debootstrap)"; exit 1; }
[ "$(id -u)" = 0 ] || { say "debootstrap needs root"; exit 1; }
docker version >/dev/null 2>&1 || { say "dockerd does not answer (scripts/start-dockerd.sh)"; exit 1; }

# The first Debian archive apt uses for the suite (deb822 .sources files, then one-line lists).
mirror="${CONCH_DEBIAN_MIRROR:-}"
if [ -z "$mirror" ]; then
  mirror=$(awk '
    /^URIs:/ { uri = $2 } /^Suites:/ { for (i = 2; i <= NF; i++) if ($i == "'$suite'") found = 1 }
    /^$/ { if (found && uri != "") { print uri; exit } found = 0; uri = "" }
    END { if (found && uri != "") print uri }' /etc/apt/sources.list.d/*.sources 2>/dev/null | head -n1)
fi
if [ -z "$mirror" ]; then
  mirror=$(awk '$1 == "deb" && $3 == "'$suite'" { print $2; exit }' /etc/apt/sources.list /etc/apt/sources.list.d/*.list 2>/dev/null | head -n1)
fi
mirror="${mirror:-http://deb.debian.org/debian}"

root=$(mktemp -d "${TMPDIR:-/tmp}/conch-image.XXXXXX")
log="$root.log"
trap 'mountpoint -q "$root/proc" && umount "$root/proc"; rm -rf "$root"' EXIT
fail() { say "$1 failed; the last lines of $log:"; tail -n 20 "$log" >&2; exit 1; }
started=$SECONDS
say "debootstrap --variant=minbase $suite from $mirror into $root"
debootstrap --variant=minbase "$suite" "$root" "$mirror" >"$log" 2>&1 || fail debootstrap
say "debootstrap done in $((SECONDS - started)) s; apt-get install $packages"
mount -t proc proc "$root/proc"
# shellcheck disable=SC2086
{ chroot "$root" apt-get update -qq && chroot "$root" env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $packages; } >>"$log" 2>&1 || fail 'apt-get install'
umount "$root/proc"
rm -f "$log"
say "installed in $((SECONDS - started)) s; trimming docs and caches"
rm -rf "$root"/usr/share/doc/* "$root"/usr/share/man/* "$root"/usr/share/info/* "$root"/var/cache/apt/archives/*.deb "$root"/var/lib/apt/lists/*
say "importing $image"
tar --numeric-owner -C "$root" -c . | docker import --change 'CMD ["/bin/bash"]' - "$image" >/dev/null
say "$image built in $((SECONDS - started)) s ($(docker image inspect -f '{{.Size}}' "$image" | awk '{ printf "%d MB", $1 / 1e6 }'))"
