/**
 * Where host daemons listen. connect(2) to a Unix socket needs no write access to its file
 * system, so a read-only mount does not stop it: a confined process that reaches dockerd's
 * socket creates a container that binds any host folder, as root. bubblewrap covers the runtime
 * folders (`/run`, and `/var/run` when it is not a link to it) with a private tmpfs in every
 * confined mode, then binds back read-only the few regular files programs read through them,
 * and masks the daemon sockets known to live elsewhere.
 */

/** Covered by a private, empty tmpfs (each real path once): dockerd, containerd, systemd, D-Bus, the user's runtime folders. */
export const RUNTIME_DIRS = ['/run', '/var/run'] as const

/** Files whose real path may lie in a runtime folder (systemd-resolved's `resolv.conf`): bound back read-only there. */
export const RUNTIME_FILES_KEPT = ['/etc/resolv.conf'] as const

/**
 * Daemon sockets outside the runtime folders, covered by the empty file when they exist: LXD (deb
 * and snap) and Incus. dockerd's, containerd's and podman's (`/run/docker.sock`,
 * `/run/containerd/containerd.sock`, `/run/podman/podman.sock`, and by `/var/run`) are not listed:
 * the private `/run` hides them, and no path bound after it may bring the host's back — the
 * workspace and each `readWritePaths` entry are refused in `/run` and `/var` (the workspace rule,
 * `workspaceRootProblem`), so a mask there would cover nothing (and bubblewrap cannot make a
 * mount point through the `/var/run` link into its tmpfs).
 */
export const SERVICE_SOCKETS_MASKED = ['/var/lib/lxd/unix.socket', '/var/snap/lxd/common/lxd/unix.socket', '/var/lib/incus/unix.socket'] as const
