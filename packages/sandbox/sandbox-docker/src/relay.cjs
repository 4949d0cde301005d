'use strict'
/**
 * The relay of one confined process: runs `argv` as an exec in the agent's container through the
 * Engine API and carries bytes between it and this process's stdio. On a terminal (the PTY
 * backend's) the exec gets a TTY of its own in the container, this terminal is put in raw mode so
 * the container's line discipline is the only one, and size changes follow (SIGWINCH → exec
 * resize). Without a terminal the exec's stdout and stderr are demultiplexed onto ours.
 *
 * argv: relay.cjs <spec JSON> <program> [args…]; spec: {daemon, container, token, cwd, path, guard}.
 * The exec runs `sh -c '<guard> exec "$@"' <token> <program> [args…]` with this process's
 * environment (PATH replaced by the container's `path`): `token` is its `$0`, which the provider
 * finds in the exec's inspect to learn its host pid. Exits with the exec's exit code, after every
 * byte of its output was written; 125 (and a line on stderr) when it cannot start.
 */
const Docker = require('dockerode')

const [specText, ...argv] = process.argv.slice(2)
const spec = JSON.parse(specText)
const docker = new Docker(spec.daemon)
const tty = process.stdin.isTTY === true && process.stdout.isTTY === true

function fail(error) {
  process.stderr.write(`conch: cannot start ${argv[0]} in container ${spec.container.slice(0, 12)}: ${error && error.message ? error.message : error}\r\n`)
  process.exit(125)
}

async function main() {
  const env = Object.entries(process.env)
    .filter(([name]) => name !== 'PATH')
    .map(([name, value]) => `${name}=${value}`)
  env.push(`PATH=${spec.path}`)
  const exec = await docker.getContainer(spec.container).exec({
    Cmd: ['/bin/sh', '-c', `${spec.guard}exec "$@"`, spec.token, ...argv],
    Env: env,
    WorkingDir: spec.cwd,
    AttachStdin: true,
    AttachStdout: true,
    AttachStderr: true,
    Tty: tty,
  })
  const stream = await exec.start({ hijack: true, stdin: true, Tty: tty })
  if (tty) {
    process.stdin.setRawMode(true)
    const resize = () => exec.resize({ h: process.stdout.rows, w: process.stdout.columns }).catch(() => {})
    process.on('SIGWINCH', resize)
    resize()
    stream.pipe(process.stdout, { end: false })
  } else {
    docker.modem.demuxStream(stream, process.stdout, process.stderr)
  }
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
