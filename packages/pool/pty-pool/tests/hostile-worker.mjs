// A hostile pool worker for the supervisor's tests: it speaks enough of the protocol to be
// started, then breaks it the way argv[2] says. It first starts a daemon in a session of its own
// (setsid), re-parented away from its tree, so the test can check that stopping the worker
// stops everything that carries its tag. argv[3] is the daemon's `sleep` duration (its marker).
import { spawn } from 'node:child_process'
import { Socket } from 'node:net'

const mode = process.argv[2]
const marker = process.argv[3] ?? '7777'
const channel = new Socket({ fd: 3, readable: true, writable: true })
const daemon = spawn('setsid', ['sleep', marker], { detached: true, stdio: 'ignore' })
daemon.unref()

// `stubborn` ignores SIGTERM: the supervisor's shutdown must KILL it after its grace.
if (mode === 'stubborn') process.on('SIGTERM', () => {})

const send = (message) => channel.write(`${JSON.stringify(message)}\n`)
let buffered = ''
channel.on('data', (chunk) => {
  buffered += chunk.toString('utf8')
  let newline
  while ((newline = buffered.indexOf('\n')) >= 0) {
    const message = JSON.parse(buffered.slice(0, newline))
    buffered = buffered.slice(newline + 1)
    onMessage(message)
  }
})

function onMessage(message) {
  if (message.type === 'init') return send({ type: 'ready', pid: process.pid })
  if (message.type === 'ping') {
    if (mode !== 'mute') send({ type: 'pong', id: message.id })
    return
  }
  if (message.type !== 'invoke') return
  switch (mode) {
    case 'oversize':
      // One line beyond any bound, sent in pieces with no newline for a long time.
      channel.write('{"type":"result","id":'.padEnd(64 * 1024, ' '))
      return
    case 'forged':
      // A result for an invoke nobody asked for.
      return send({ type: 'result', id: message.id + 1000, ok: true, text: 'forged', source: 'screen', path: 'warm' })
    case 'bad-shape':
      // A result with a field the protocol does not have.
      return send({ type: 'result', id: message.id, ok: true, text: 'x', source: 'screen', path: 'warm', exec: 'rm -rf /' })
    case 'bad-counter':
      // A counter the main process does not export (an attempt to reach another metric).
      return send({ type: 'count', name: '__proto__' })
    case 'mute':
    case 'deaf':
      // `deaf` answers pings but never an invoke, nor confirms its cancel.
      return
    case 'crash':
      process.exit(3)
  }
}
