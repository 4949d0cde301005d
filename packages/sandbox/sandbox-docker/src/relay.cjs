'use strict'
/**
 * The relay of one confined process: runs `argv` as an exec in the agent's container through the
 * Engine API and carries bytes between it and this process's terminal (the PTY backend's): the
 * exec gets a TTY of its own in the container, this terminal is put in raw mode so the
 * container's line discipline is the only one, and size changes follow (SIGWINCH → exec resize).
 * A process without a terminal (a run_code program, with its control channel on fd 3) is refused:
 * nothing carries its other descriptors into the container.
 *
 * argv: relay.cjs <spec JSON> <program> [args…]; spec: {daemon, container, token, cwd, path, guard,
 * env}. The exec runs `sh -c '<guard> exec "$@"' <token> <program> [args…]` with this process's
 * environment (PATH replaced by the container's `path`) and the agent's `env` (the egress proxy's
 * variables): `token` is its `$0`, which the provider finds in the exec's inspect to learn its
 * host pid. Exits with the exec's exit code, after every byte of its output was written; 125 (and
 * a line on stderr) when it cannot start.
 */
const Docker = require('dockerode')

const [specText, ...argv] = process.argv.slice(2)
const spec = JSON.parse(specText)
const docker = new Docker(spec.daemon)
if (process.stdin.isTTY !== true || process.stdout.isTTY !== true) {
  process.stderr.write(
    `conch: the Docker sandbox runs programs on a terminal only, and ${argv[0]} has none (run_code programs are not run in containers); ` +
      'use terminals, or load @conch/sandbox-local for run_code\n',
  )
  process.exit(125)
}

function fail(error) {
  process.stderr.write(`conch: cannot start ${argv[0]} in container ${spec.container.slice(0, 12)}: ${error && error.message ? error.message : error}\r\n`)
  process.exit(125)
}

async function main() {
  const env = Object.entries(process.env)
    .filter(([name]) => name !== 'PATH')
    .map(([name, value]) => `${name}=${value}`)
  env.push(`PATH=${spec.path}`, ...Object.entries(spec.env).map(([name, value]) => `${name}=${value}`))
  const exec = await docker.getContainer(spec.container).exec({
    Cmd: ['/bin/sh', '-c', `${spec.guard}exec "$@"`, spec.token, ...argv],
    Env: env,
    WorkingDir: spec.cwd,
    AttachStdin: true,
    AttachStdout: true,
    AttachStderr: true,
    Tty: true,
  })
  const stream = await exec.start({ hijack: true, stdin: true, Tty: true })
  process.stdin.setRawMode(true)
  const resize = () => exec.resize({ h: process.stdout.rows, w: process.stdout.columns }).catch(() => {})
  process.on('SIGWINCH', resize)
  resize()
  stream.pipe(process.stdout, { end: false })
  process.stdin.pipe(stream)
  await new Promise((resolve) => {
    stream.on('end', resolve)
    stream.on('close', resolve)
    stream.on('error', resolve)
  })
  const { ExitCode } = await exec.inspect()
  process.stdout.write('', () => process.exit(typeof ExitCode === 'number' ? ExitCode : 125))
}

main().catch(fail)
