import { DEFAULT_DENY_WRITE, denyWriteEntry, maxExposedPorts } from '@conch/sandbox'
import { z } from 'zod'

/** A Docker daemon address in `DOCKER_HOST` syntax: `unix:///path/docker.sock`, `tcp://host:port`, `http(s)://host:port`. */
const daemonAddress = z
  .string()
  .regex(/^(unix:\/\/\/.+|(tcp|http|https):\/\/[^/]+)$/, { message: 'must be unix:///path/to/docker.sock or tcp://host:port' })

export const Config = z
  .strictObject({
    image: z
      .string()
      .min(1)
      .default('debian:bookworm-slim')
      .describe(
        "The image each agent's container is created from. It must be on the daemon already (`docker pull` or `docker import`): " +
          'conch never pulls; a missing one fails the first confined process with CONTAINER_IMAGE_MISSING.',
      ),
    host: daemonAddress
      .optional()
      .describe('The Docker daemon; default: the DOCKER_HOST variable of the conch process, else unix:///var/run/docker.sock.'),
    memoryMb: z.number().int().positive().default(2048).describe("Memory limit of each agent's container, in MiB (swap included)."),
    pids: z.number().int().positive().default(512).describe("How many processes and threads each agent's container may hold at once (the pids cgroup)."),
    cpus: z.number().positive().default(2).describe("CPU limit of each agent's container, in CPUs (fractions allowed)."),
    writableRoot: z
      .boolean()
      .default(false)
      .describe(
        "Whether workspace-write processes may write the container's own files outside the workspace (installing packages, writing /etc); " +
          'they are the container\'s copy, gone with it. The system prompt says so. Read-only is always read-only.',
      ),
    workingDir: z
      .string()
      .regex(/^\//, { message: 'must be an absolute path in the image' })
      .optional()
      .describe(
        'Where a process that asks for the workspace root (a terminal opened without a cwd) starts: this folder of the image instead, ' +
          "such as a task image's WORKDIR whose files are the container's own (writable with writableRoot). Default: the workspace root.",
      ),
    denyWrite: z
      .array(denyWriteEntry)
      .default(DEFAULT_DENY_WRITE)
      .describe(
        'Paths of the workspace its processes cannot write under workspace-write, relative to the workspace root (a trailing / marks a folder): ' +
          'each one that exists when the container is made is mounted read-only over itself, a missing one is held by a tmpfs (README).',
      ),
    maxExposedPorts,
    startTimeoutMs: z
      .number()
      .int()
      .positive()
      .default(30_000)
      .describe('How long making a container, or starting one process in it, may take, in ms.'),
  })
  .prefault({})

export type Config = z.output<typeof Config>
