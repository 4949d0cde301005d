// The program's side of @conch/ptc-node, in a fresh `node` process with the control channel on
// fd 3 (frames: channel.ts and the README). Plain CommonJS: no loader, no ES module loader.
//
// The channel starts synchronous (fd 3 is a blocking socketpair end): `ready` is one write(2),
// the first frame one read(2). Asynchronous reads (replies, the host closing) need a net.Socket
// (an fs read would hold a pool thread and keep the process from exiting), whose loading costs
// milliseconds, so it opens only on `prepare`, the first binding call, or the event loop's next
// turn after the program started. It makes the descriptor non-blocking: every later frame uses it.
'use strict'
const fs = require('node:fs')
const { createRequire } = require('node:module')
const { format } = require('node:util')
const vm = require('node:vm')

const CONTROL_FD = 3
const FILENAME = 'program.ts'
const PREFIX = '(async function () {'

// The program starts with an empty environment but for the variable `CONCH_PTC_KEEP` names (the
// subprocess tag, by which the supervisor and the teardown find what it starts) and the egress
// proxy's variables (`proxyEnvironment` of @conch/sandbox: the Node preload that routes fetch,
// loaded before this script, among them), for what it starts.
const kept = process.env.CONCH_PTC_KEEP
const PROXY_VARIABLES = new Set(['HTTP_PROXY', 'HTTPS_PROXY', 'ALL_PROXY', 'NO_PROXY', 'http_proxy', 'https_proxy', 'all_proxy', 'no_proxy', 'NODE_USE_ENV_PROXY', 'NODE_OPTIONS', 'NODE_PROXY_UNDICI'])
for (const name of Object.keys(process.env)) if (name !== kept && !PROXY_VARIABLES.has(name)) delete process.env[name]

const state = { phase: 'booting', nextId: 1, finished: false, installed: false }
const pending = new Map()
/** The asynchronous channel, once opened (see above). */
let socket

/** One frame in one buffer: the 4-byte big-endian length, then the UTF-8 JSON. */
function frame(message) {
  const json = JSON.stringify(message)
  const length = Buffer.byteLength(json, 'utf8')
  const bytes = Buffer.allocUnsafe(4 + length)
  bytes.writeUInt32BE(length, 0)
  bytes.write(json, 4, length, 'utf8')
  return bytes
}

/** Sends one frame. */
function send(message) {
  if (state.finished) return
  out(frame(message))
}

/**
 * Puts `bytes` on the channel, in order: straight to the descriptor while the socket is absent or
 * has nothing queued, the rest behind the socket's queue. Returns whether all of `bytes` is in
 * the kernel; else `written` runs once it is.
 */
function out(bytes, written) {
  if (socket === undefined) {
    write(bytes, true)
    return true
  }
  const sent = socket.writableLength === 0 ? write(bytes, false) : 0
  if (sent === bytes.length) return true
  socket.write(sent === 0 ? bytes : bytes.subarray(sent), written)
  return false
}

/** `n` bytes read synchronously, or undefined at the end of the channel. */
function readExactly(n) {
  const buffer = Buffer.allocUnsafe(n)
  let offset = 0
  while (offset < n) {
    let count
    try {
      count = fs.readSync(CONTROL_FD, buffer, offset, n - offset, null)
    } catch (error) {
      if (error.code === 'EINTR' || error.code === 'EAGAIN') continue
      return undefined
    }
    if (count === 0) return undefined
    offset += count
  }
  return buffer
}

/** The next frame read synchronously (before the socket exists), or undefined at the end. */
function readFrame() {
  const head = readExactly(4)
  if (head === undefined) return undefined
  const body = readExactly(head.readUInt32BE(0))
  return body === undefined ? undefined : parse(body)
}

/** A frame's JSON body; a malformed one ends the process. */
function parse(body) {
  try {
    return JSON.parse(body.toString('utf8'))
  } catch {
    process.exit(72)
  }
}

function openSocket() {
  if (socket !== undefined) return
  const { Socket } = require('node:net')
  socket = new Socket({ fd: CONTROL_FD, readable: true, writable: true })
  socket.on('error', () => process.exit(70))
  socket.on('end', () => process.exit(state.finished ? 0 : 71))
  socket.on('data', (chunk) => {
    unread = readFrames(unread.length === 0 ? chunk : Buffer.concat([unread, chunk]))
  })
}

/** Bytes of the asynchronous channel not yet read as frames. */
let unread = Buffer.alloc(0)

/** Hands each complete frame of `buffer` to `receive`; returns the bytes after the last one. */
function readFrames(buffer) {
  while (buffer.length >= 4) {
    const length = buffer.readUInt32BE(0)
    if (buffer.length < 4 + length) break
    const body = buffer.subarray(4, 4 + length)
    buffer = buffer.subarray(4 + length)
    receive(parse(body))
  }
  return buffer
}

function finish(message) {
  if (state.finished) return
  const bytes = frame(message)
  state.finished = true
  for (const { reject } of pending.values()) reject(new Error('the program has finished'))
  pending.clear()
  // The children are looked at once the frame is in the kernel, while the host reads it.
  if (out(bytes, leaveIfChildless)) leaveIfChildless()
}

function leaveIfChildless() {
  if (childless()) die()
}

/**
 * Writes `bytes` to the descriptor; returns the byte count written. `blocking`: all of it, a
 * failed channel ending the process; else what the non-blocking descriptor takes now.
 */
function write(bytes, blocking) {
  let offset = 0
  while (offset < bytes.length) {
    try {
      offset += fs.writeSync(CONTROL_FD, bytes, offset)
    } catch (error) {
      if (error.code === 'EINTR' || (blocking && error.code === 'EAGAIN')) continue
      if (blocking) process.exit(70)
      return offset
    }
  }
  return offset
}

/**
 * Whether no thread of this process has children (`/proc/self/task/<tid>/children`, proc(5));
 * false when it cannot tell. After the terminal frame, a childless process leaves at once by
 * SIGKILL to itself (skipping Node's exit) rather than wait for the host's: the frame is in the
 * kernel already, and without children there is no tree for the host to capture.
 */
function childless() {
  let tids
  try {
    tids = fs.readdirSync('/proc/self/task')
  } catch {
    return false
  }
  for (const tid of tids) {
    let children
    try {
      children = fs.readFileSync(`/proc/self/task/${tid}/children`, 'latin1')
    } catch {
      return false
    }
    if (children.trim() !== '') return false
  }
  return true
}

/** The process's own kill and pid, taken before the program can replace them. */
const selfKill = process.kill.bind(process)
const selfPid = process.pid
function die() {
  selfKill(selfPid, 'SIGKILL')
}

function receive(message) {
  if (state.finished) return
  if (message.t === 'run' && state.phase === 'ready') {
    runProgram(message)
  } else if (message.t === 'reply') {
    const waiter = pending.get(message.id)
    if (waiter === undefined) return
    pending.delete(message.id)
    if (message.ok) waiter.resolve(message.value)
    else waiter.reject(new Error(String(message.message)))
  }
}

/** Why `value` is not lossless JSON (a path and a reason), or undefined. Mirrors @conch/ptc's isLosslessJson. */
function jsonProblem(value) {
  const stack = new Set()
  const walk = (item, path) => {
    switch (typeof item) {
      case 'string':
      case 'boolean':
        return undefined
      case 'number':
        return Number.isFinite(item) ? undefined : `${path} is ${String(item)}`
      case 'undefined':
        return `${path} is undefined`
      case 'bigint':
        return `${path} is a BigInt`
      case 'function':
      case 'symbol':
        return `${path} is a ${typeof item}`
      default: {
        if (item === null) return undefined
        if (stack.has(item)) return `${path} is a cycle`
        stack.add(item)
        try {
          if (Array.isArray(item)) {
            for (let index = 0; index < item.length; index++) {
              if (!(index in item)) return `${path}[${index}] is a hole`
              const bad = walk(item[index], `${path}[${index}]`)
              if (bad !== undefined) return bad
            }
            return undefined
          }
          const proto = Object.getPrototypeOf(item)
          if (proto !== Object.prototype && proto !== null) return `${path} is not a plain object (${proto?.constructor?.name ?? 'unknown'})`
          if (Object.getOwnPropertySymbols(item).length > 0) return `${path} has symbol keys`
          for (const key of Object.keys(item)) {
            const bad = walk(item[key], `${path}.${key}`)
            if (bad !== undefined) return bad
          }
          return undefined
        } finally {
          stack.delete(item)
        }
      }
    }
  }
  return walk(value, '$')
}

function log(stream, args) {
  send({ t: 'log', s: stream, text: `${format(...args)}\n` })
}

/**
 * `console` writes frames; so do `process.stdout.write` and `process.stderr.write`. The two
 * streams are created by Node on first use (a pipe's costs a net.Socket), so each is patched
 * when the program first touches it rather than up front.
 */
function installOutput() {
  const shim = {}
  for (const method of ['log', 'info', 'debug']) shim[method] = (...args) => log('out', args)
  for (const method of ['warn', 'error']) shim[method] = (...args) => log('err', args)
  Object.defineProperty(globalThis, 'console', { value: Object.freeze(shim), writable: true, configurable: true })
  const writer = (stream) =>
    function write(chunk, encoding, callback) {
      const text = typeof chunk === 'string' ? chunk : Buffer.from(chunk).toString('utf8')
      send({ t: 'log', s: stream, text })
      const done = typeof encoding === 'function' ? encoding : callback
      if (typeof done === 'function') queueMicrotask(() => done())
      return true
    }
  for (const [name, stream] of [
    ['stdout', 'out'],
    ['stderr', 'err'],
  ]) {
    const original = Object.getOwnPropertyDescriptor(process, name)
    let patched
    const get = () => {
      if (patched === undefined) {
        patched = original.get ? original.get.call(process) : original.value
        patched.write = writer(stream)
      }
      return patched
    }
    Object.defineProperty(process, name, { configurable: true, enumerable: original.enumerable, get })
  }
}

function call(ns, fn, args) {
  if (state.finished) return Promise.reject(new Error('the program has finished'))
  const problem = jsonProblem(args === undefined ? null : args)
  if (problem !== undefined) return Promise.reject(new TypeError(`the arguments of ${ns}.${fn} are not JSON: ${problem.replace('$', 'args')}`))
  // The reply arrives asynchronously: the socket must be there to read it.
  openSocket()
  const id = state.nextId++
  return new Promise((resolve, reject) => {
    pending.set(id, { resolve, reject })
    send({ t: 'call', id, ns, fn, args: args === undefined ? null : args })
  })
}

function installBindings(bindings) {
  for (const [ns, fns] of Object.entries(bindings)) {
    const namespace = Object.create(null)
    for (const fn of fns) namespace[fn] = (args) => call(ns, fn, args)
    Object.defineProperty(globalThis, ns, { value: Object.freeze(namespace), writable: false, configurable: false, enumerable: false })
  }
}

/** `require` for the program, resolving from its working directory; made on first use. */
function installRequire() {
  let made
  Object.defineProperty(globalThis, 'require', {
    configurable: true,
    enumerable: false,
    get: () => (made ??= createRequire(`${process.cwd()}/`)),
    set: (value) => Object.defineProperty(globalThis, 'require', { value, writable: true, configurable: true, enumerable: false }),
  })
}

/** The message and the program's own frames of a thrown value's stack. */
function describe(error) {
  if (error instanceof Error || (typeof error === 'object' && error !== null && 'stack' in error)) {
    const message = `${error.name ?? 'Error'}: ${error.message ?? ''}`
    const lines = String(error.stack ?? '').split('\n')
    const frames = lines.filter((line) => /^\s+at /.test(line) && line.includes(FILENAME)).map((line) => line.replace(/\(?(?:file:\/\/)?[^\s()]*program\.ts/, (m) => (m.startsWith('(') ? '(' : '') + FILENAME))
    return { message, stack: [message, ...frames].join('\n') }
  }
  let text
  try {
    text = typeof error === 'string' ? error : JSON.stringify(error) ?? String(error)
  } catch {
    text = String(error)
  }
  return { message: `Uncaught ${text}` }
}

function compile(code) {
  return new vm.Script(`${PREFIX}${code}\n})`, {
    filename: FILENAME,
    columnOffset: -PREFIX.length,
    importModuleDynamically: vm.constants.USE_MAIN_CONTEXT_DEFAULT_LOADER,
  })
}

function runProgram({ code, bindings, maxOutputBytes }) {
  state.phase = 'running'
  installGlobals()
  installBindings(bindings ?? {})
  let program
  try {
    program = compile(code).runInThisContext()
  } catch (error) {
    finish({ t: 'done', ok: false, kind: 'exception', ...describe(error) })
    return
  }
  // A program still running at the next turn of the event loop gets the asynchronous channel
  // (replies, and the end of the channel if the host goes away).
  setImmediate(openSocket)
  program().then(
    (value) => finish(completion(value, maxOutputBytes)),
    (error) => finish({ t: 'done', ok: false, kind: 'exception', ...describe(error) }),
  )
}

/** The terminal frame for a completion value: the value, or why it cannot be one. */
function completion(value, maxOutputBytes) {
  const problem = jsonProblem(value)
  if (problem !== undefined) return { t: 'done', ok: false, kind: 'invalid-output', message: `the completion value is not lossless JSON: ${problem}` }
  const text = JSON.stringify(value)
  if (Buffer.byteLength(text, 'utf8') > maxOutputBytes) {
    return { t: 'done', ok: false, kind: 'output-limit', message: `the completion value is ${Buffer.byteLength(text, 'utf8')} bytes of JSON, over maxOutputBytes ${maxOutputBytes}` }
  }
  return { t: 'done', ok: true, value }
}

/** `console`, the output streams and `require`: the same for every program of this process. */
function installGlobals() {
  if (state.installed) return
  state.installed = true
  installOutput()
  installRequire()
}

/**
 * A spare: everything a run needs that does not depend on the program, done while it waits —
 * the socket, the globals, and a first call of the functions a run goes through (V8 compiles a
 * function when it is first called).
 */
function prepare() {
  openSocket()
  installGlobals()
  compile('return 0')
  childless()
  // The frame reader and the completion check, on values that change nothing: a reply to no
  // call is ignored, and the completion frame is only built.
  readFrames(frame({ t: 'reply', id: 0, ok: true, value: null }))
  completion({ a: [1, 'x', true, null, { b: 2.5 }] }, 1024)
  describe(new Error('warm-up'))
  frame({ t: 'log', s: 'out', text: format('%s', 1) })
  out(Buffer.alloc(0))
  socket.write(Buffer.alloc(0))
}

process.on('uncaughtException', (error) => finish({ t: 'done', ok: false, kind: 'exception', ...describe(error) }))
process.on('unhandledRejection', (error) => finish({ t: 'done', ok: false, kind: 'exception', ...describe(error) }))

state.phase = 'ready'
send({ t: 'ready' })
const first = readFrame()
if (first === undefined) process.exit(71)
if (first.t === 'prepare') prepare()
else receive(first)
