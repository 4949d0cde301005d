/**
 * A local chat-completions endpoint on 127.0.0.1 that answers each POST with the next scripted
 * reply: an SSE stream of recorded chunks, an HTTP error, or a stream that stays open.
 */
import { createServer, type IncomingHttpHeaders, type Server, type ServerResponse } from 'node:http'
import type { AddressInfo } from 'node:net'

export type Reply =
  | { kind: 'sse'; chunks: unknown[] }
  | { kind: 'error'; status: number; body: unknown; headers?: Record<string, string> }
  /** Sends `chunks`, then keeps the response open until the client goes away. */
  | { kind: 'hang'; chunks: unknown[] }

export interface Received {
  url: string
  headers: IncomingHttpHeaders
  body: Record<string, unknown>
}

export interface FakeServer {
  baseURL: string
  replies: Reply[]
  received: Received[]
  /** Resolves when a hanging response's connection was closed by the client. */
  closed: Promise<void>
  close(): Promise<void>
}

export async function startFakeServer(): Promise<FakeServer> {
  const replies: Reply[] = []
  const received: Received[] = []
  let markClosed!: () => void
  const closed = new Promise<void>((resolve) => (markClosed = resolve))
  const server: Server = createServer((req, res) => {
    let text = ''
    req.setEncoding('utf8')
    req.on('data', (part: string) => (text += part))
    req.on('end', () => {
      received.push({ url: req.url ?? '', headers: req.headers, body: JSON.parse(text) as Record<string, unknown> })
      const reply = replies.shift()
      if (!reply) {
        res.writeHead(599, { 'content-type': 'application/json' }).end(JSON.stringify({ error: { message: 'fake server has no reply left' } }))
        return
      }
      switch (reply.kind) {
        case 'error':
          res.writeHead(reply.status, { 'content-type': 'application/json', ...reply.headers }).end(JSON.stringify(reply.body))
          return
        case 'sse':
          writeChunks(res, reply.chunks)
          res.end('data: [DONE]\n\n')
          return
        case 'hang':
          writeChunks(res, reply.chunks)
          res.on('close', () => markClosed())
          return
      }
    })
  })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  const { port } = server.address() as AddressInfo
  return {
    baseURL: `http://127.0.0.1:${port}`,
    replies,
    received,
    closed,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections()
        server.close(() => resolve())
      }),
  }
}

function writeChunks(res: ServerResponse, chunks: unknown[]): void {
  if (!res.headersSent) res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache' })
  for (const chunk of chunks) res.write(`data: ${JSON.stringify(chunk)}\n\n`)
}

/** A `chat.completion.chunk` as DeepSeek and OpenAI stream it. */
export function chunk(delta: Record<string, unknown>, finishReason: string | null = null, usage?: Record<string, number>): unknown {
  return {
    id: 'chatcmpl-1',
    object: 'chat.completion.chunk',
    created: 1767225600,
    model: 'deepseek-chat',
    choices: usage ? [] : [{ index: 0, delta, logprobs: null, finish_reason: finishReason }],
    ...(usage ? { usage } : {}),
  }
}
