'use strict'
/**
 * In the container (run by the host's node): connects to the relay's socket and starts the
 * program with that connection as its fd 3, then exits as it does.
 * argv: shim.cjs <socket path> <program> [args…]
 */
const { spawn } = require('node:child_process')
const { connect } = require('node:net')

const [path, ...argv] = process.argv.slice(2)
const channel = connect(path)
// Nothing of the channel is read here: every byte is the program's.
channel.pause()
channel.on('error', (error) => {
  process.stderr.write(`conch: cannot reach the control channel of ${argv[0]}: ${error.message}\n`)
  process.exit(125)
})
channel.on('connect', () => {
  const child = spawn(argv[0], argv.slice(1), { stdio: ['inherit', 'inherit', 'inherit', channel] })
  // The program holds the channel now; this process lets go of it, so its end is the program's.
  channel.destroy()
  for (const signal of ['SIGTERM', 'SIGINT', 'SIGHUP']) process.on(signal, () => child.kill(signal))
  child.on('error', (error) => {
    process.stderr.write(`conch: cannot start ${argv[0]}: ${error.message}\n`)
    process.exit(127)
  })
  child.on('exit', (code, signal) => process.exit(code ?? 128 + (require('node:os').constants.signals[signal] ?? 0)))
})
