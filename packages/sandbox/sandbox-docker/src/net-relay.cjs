'use strict'
/**
 * The loopback end of an agent's egress proxy in its container: started by the provider inside
 * the container's network namespace (nsenter --net), it listens on a port of the container's
 * 127.0.0.1 (printed on stdout once listening) and carries each connection to the proxy's unix
 * socket on the host (the path is the host's: only the network namespace is entered). It exits
 * when its stdin closes, so it never outlives the conch that started it.
 *
 * argv: net-relay.cjs <socket path>
 */
const net = require('node:net')

const socketPath = process.argv[2]
const server = net.createServer((client) => {
  const upstream = net.connect(socketPath)
  client.pipe(upstream).pipe(client)
  client.on('error', () => upstream.destroy())
  upstream.on('error', () => client.destroy())
})
server.listen(0, '127.0.0.1', () => process.stdout.write(`${server.address().port}\n`))
process.stdin.on('end', () => process.exit(0))
process.stdin.on('error', () => process.exit(0))
process.stdin.resume()
