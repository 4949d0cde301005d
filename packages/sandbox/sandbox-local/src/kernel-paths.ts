/**
 * Kernel interfaces a confined process must not change or read. bubblewrap's `--proc /proc`
 * mounts a fresh procfs whose `/proc/sys` stays writable to root — and sysctls check only the
 * file's owner bits, not capabilities, so root in the sandbox could set
 * `kernel.core_pattern` to a program the host kernel then runs as root. The lists follow the
 * paths the OCI runtimes make read-only or mask by default (runc's and Docker's
 * `ReadonlyPaths` and `MaskedPaths`).
 */

/** Bound read-only onto themselves (the host's view of the same kernel files), when they exist. */
export const KERNEL_READ_ONLY_PATHS = ['/proc/sys', '/proc/sysrq-trigger', '/proc/irq', '/proc/bus', '/proc/fs'] as const

/** Covered by an empty file or folder, when they exist: kernel memory, keys, timers, firmware, hardware. */
export const KERNEL_MASKED_PATHS = [
  '/proc/acpi',
  '/proc/asound',
  '/proc/interrupts',
  '/proc/kcore',
  '/proc/keys',
  '/proc/latency_stats',
  '/proc/sched_debug',
  '/proc/scsi',
  '/proc/timer_list',
  '/proc/timer_stats',
  '/sys/firmware',
  '/sys/devices/virtual/powercap',
  '/sys/fs/selinux',
] as const
