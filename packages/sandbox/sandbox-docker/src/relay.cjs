'use strict'
/**
 * The relay of one confined process: runs `argv` as an exec in the agent's container and carries
 * its bytes. On a terminal the exec gets a TTY and this one goes raw; without one, the daemon's
 * stream is split onto stdout and stderr, and an open fd 3 (the control channel) is served on
 * `<token>.sock` in the agent's folder for `shim.cjs` to connect to.
 * argv: relay.cjs <spec JSON> <program> [args…]; spec: {daemon, container, token, cwd, path, guard,
 * env, folder? (local daemon only), runDir}. The exec runs `sh -c '<guard> exec "$@"' <token> …`:
 * `token` as `$0` lets the provider find its host pid. Exits with the exec's code once its output
 * is written; 125 (and a line on stderr) when it cannot start.
 */
const { fstatSync, rmSync } = require('node:fs')
const { createServer, Socket } = require('node:net')
const { join } = require('node:path')
const Docker = require('dockerode')

const [specText, ...argv] = process.argv.slice(2)
const spec = JSON.parse(specText)
const docker = new Docker(spec.daemon)
const tty = process.stdin.isTTY === true && process.stdout.isTTY === true

function fail(error) {
  process.stderr.write(`conch: cannot start ${argv[0]} in container ${spec.container.slice(0, 12)}: ${error && error.message ? error.message : error}\r\n`)
  process.exit(125)
}

/** Whether fd 3 is a socket this process was given (a control channel). */
function hasChannel() {
  try {
    return fstatSync(3).isSocket()
  } catch {
    return false
  }
}

/** Carries fd 3 to the first connection on `<folder>/<token>.sock`; resolves with the socket's path in the container. */
async function carryChannel() {
  if (spec.folder === undefined) {
    throw new Error(
      `run_code programs need a Docker daemon on this host (a unix:// socket): ${argv[0]}'s control channel and files are bind-mounted from here; point host in the sandbox-docker entry of cordis.yml (or DOCKER_HOST) at a local daemon's unix:// socket, or load @conch/sandbox-local for run_code`,
    )
  }
  const control = new Socket({ fd: 3, readable: true, writable: true })
  const path = join(spec.folder, `${spec.token}.sock`)
  const server = createServer({ pauseOnConnect: true }, (peer) => {
    // One program, one connection: nothing else can take the channel once it is taken.
    server.close()
    rmSync(path, { force: true })
    peer.pipe(control).pipe(peer)
    peer.resume()
    peer.on('error', () => control.destroy())
    control.on('error', () => peer.destroy())
  })
  await new Promise((resolve, reject) => server.once('error', reject).listen(path, resolve))
  // A program that never connects (its exec failed) leaves no socket behind.
  process.on('exit', () => rmSync(path, { force: true }))
  return `${spec.runDir}/${spec.token}.sock`
}

async function main() {
  // The agent's variables win, but NODE_OPTIONS (the Node preload's) is appended to the process's own.
  const own = process.env.NODE_OPTIONS
  const added = spec.env.NODE_OPTIONS
  const variables = { ...process.env, PATH: spec.path, ...spec.env, ...(added !== undefined && own && own.trim() !== '' && { NODE_OPTIONS: `${own} ${added}` }) }
  const env = Object.entries(variables).map(([name, value]) => `${name}=${value}`)
  const program = !tty && hasChannel() ? [`${spec.runDir}/node`, `${spec.runDir}/shim.cjs`, await carryChannel(), ...argv] : argv
  const exec = await docker.getContainer(spec.container).exec({
    Cmd: ['/bin/sh', '-c', `${spec.guard}exec "$@"`, spec.token, ...program],
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
  // The end of stdin is the exec's (a half-close of the hijacked connection).
  process.stdin.pipe(stream)
  await new Promise((resolve) => {
    stream.on('end', resolve)
    stream.on('close', resolve)
    stream.on('error', resolve)
  })
  const { ExitCode } = await exec.inspect()
  const code = typeof ExitCode === 'number' ? ExitCode : 125
  process.stdout.write('', () => process.stderr.write('', () => process.exit(code)))
}

main().catch(fail)
