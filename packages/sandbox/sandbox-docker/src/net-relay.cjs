'use strict'
/**
 * The network relay of an agent's container, run in its network namespace only (paths are the
 * host's): one JSON request a line on stdin, one JSON answer a line on stdout.
 * - `{"egress": "<socket>"}`: a port of the container's 127.0.0.1 carried to the host's unix
 *   socket → `{"egress": <port>}`;
 * - `{"expose": <port>, "socket": "<socket>"}`: a unix socket carried to the container's
 *   127.0.0.1:<port> → `{"exposed": <port>}`.
 * A failure answers `{"error": "<message>"}`. It exits when its stdin closes.
 */
const net = require('node:net')
const readline = require('node:readline')

const answer = (object) => process.stdout.write(`${JSON.stringify(object)}\n`)

/** Carries `client` to the connection `connect()` opens, both ways; an error on either ends both. */
function carry(client, connect) {
  const upstream = connect()
  client.pipe(upstream).pipe(client)
  client.on('error', () => upstream.destroy())
  upstream.on('error', () => client.destroy())
}

function listen(server, ...where) {
  return new Promise((resolve, reject) => {
    server.once('error', reject)
    server.listen(...where, () => resolve(server))
  })
}

readline.createInterface({ input: process.stdin }).on('line', async (line) => {
  try {
    const request = JSON.parse(line)
    if (typeof request.egress === 'string') {
      const server = await listen(net.createServer((client) => carry(client, () => net.connect(request.egress))), 0, '127.0.0.1')
      answer({ egress: server.address().port })
    } else if (Number.isInteger(request.expose) && typeof request.socket === 'string') {
      await listen(net.createServer((client) => carry(client, () => net.connect(request.expose, '127.0.0.1'))), request.socket)
      answer({ exposed: request.expose })
    } else {
      answer({ error: `unknown request ${line}` })
    }
  } catch (error) {
    answer({ error: error.message })
  }
})
process.stdin.on('end', () => process.exit(0))
process.stdin.on('error', () => process.exit(0))
