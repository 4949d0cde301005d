'use strict'
/**
 * The holder of an agent's network namespace (agent-sandbox.ts), run by node under bubblewrap.
 * argv[2] is JSON `{egress?: <unix socket>}`: with one, it relays each TCP connection to a port
 * of its loopback to that socket (the host's egress proxy) and prints `{"proxyPort": N}`; it
 * prints `{}` otherwise. Each stdin line `{"port": P, "socket": S}` makes it relay connections on
 * the unix socket S (a host folder bound in) to 127.0.0.1:P of the namespace, answered with
 * `{"exposed": P}` once it listens. It idles until it is killed.
 */
const net = require('node:net')

const spec = JSON.parse(process.argv[2] || '{}')

/** Joins two sockets both ways; either side's end or error ends the other. */
function join(a, b) {
  a.pipe(b).on('error', () => a.destroy())
  b.pipe(a).on('error', () => b.destroy())
  a.on('error', () => b.destroy()).on('close', () => b.destroy())
  b.on('error', () => a.destroy()).on('close', () => a.destroy())
}

const say = (value) => process.stdout.write(JSON.stringify(value) + '\n')

if (typeof spec.egress === 'string') {
  const server = net.createServer((client) => join(client, net.connect(spec.egress)))
  server.listen(0, '127.0.0.1', () => say({ proxyPort: server.address().port }))
} else {
  say({})
}

let pending = ''
process.stdin.setEncoding('utf8').on('data', (text) => {
  pending += text
  let newline
  while ((newline = pending.indexOf('\n')) >= 0) {
    const { port, socket } = JSON.parse(pending.slice(0, newline))
    pending = pending.slice(newline + 1)
    const server = net.createServer((client) => join(client, net.connect(port, '127.0.0.1')))
    server.listen(socket, () => say({ exposed: port }))
  }
})
setInterval(() => {}, 1 << 30)
