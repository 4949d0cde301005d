/**
 * The import closure of a composition's local plugins: every module resolution made while it
 * boots (`import` through a `module.register` resolve hook, `require` through
 * `Module._resolveFilename`), so the boot protects what a local plugin imports too.
 */
import { createRequire, register } from 'node:module'
import { isAbsolute } from 'node:path'
import { fileURLToPath } from 'node:url'
import type { MessagePort } from 'node:worker_threads'

// Loaded when a recording starts: a composition without local plugins never pays for them.
const requireBuiltin = createRequire(import.meta.url)

/** One resolution: `specifier`, imported from `parent` (a path, when the importer is a file), became `path`. */
export interface Resolution {
  specifier: string
  parent?: string
  path: string
}

export interface ClosureRecording {
  /** Stops recording and returns every resolution to a file made since `recordResolutions` (the same promise when called again). */
  stop(): Promise<Resolution[]>
}

/**
 * The resolve hook, run by Node's module customization thread (Node ≥ 20.6, `module.register`):
 * it posts each successful resolution to the port it is given.
 */
const HOOKS = `
let port
export function initialize(data) { port = data.port }
export async function resolve(specifier, context, next) {
  const result = await next(specifier, context)
  port.postMessage({ specifier, parentURL: context.parentURL, url: result.url })
  return result
}
`

interface Message {
  specifier: string
  parentURL?: string
  url: string
}

let hooks: { port: MessagePort; listeners: Set<(message: Message) => void> } | undefined
let flushes = 0

function installHooks(): NonNullable<typeof hooks> {
  if (hooks) return hooks
  const { MessageChannel } = requireBuiltin('node:worker_threads') as typeof import('node:worker_threads')
  const { port1, port2 } = new MessageChannel()
  const listeners = new Set<(message: Message) => void>()
  port1.on('message', (message: Message) => {
    for (const listener of listeners) listener(message)
  })
  port1.unref()
  register(`data:text/javascript,${encodeURIComponent(HOOKS)}`, { parentURL: 'data:', data: { port: port2 }, transferList: [port2] })
  hooks = { port: port1, listeners }
  return hooks
}

/** A file path for a `file:` URL (query and fragment dropped), else undefined. */
function pathOf(url: string | undefined): string | undefined {
  if (url === undefined || !url.startsWith('file:')) return undefined
  const parsed = new URL(url)
  parsed.search = ''
  parsed.hash = ''
  return fileURLToPath(parsed)
}

interface CommonJsModule {
  _resolveFilename(request: string, parent: { filename?: string | null } | undefined, ...rest: unknown[]): string
}

/**
 * Starts recording every module resolution of this process. One recording at a time is expected
 * (the boot's); the ES module hook stays installed once made (Node has no way to remove it), and
 * only posts its resolutions.
 */
export function recordResolutions(importModule: (url: string) => Promise<unknown>): ClosureRecording {
  const recorded: Resolution[] = []
  const add = (specifier: string, parent: string | undefined, path: string | undefined) => {
    if (path !== undefined) recorded.push(parent === undefined ? { specifier, path } : { specifier, parent, path })
  }
  const installed = installHooks()
  const flush = `data:text/javascript,export{}//conch-closure-flush-${process.pid}-${++flushes}`
  let flushed: (() => void) | undefined
  const listener = (message: Message) => {
    if (message.url === flush) return flushed?.()
    add(message.specifier, pathOf(message.parentURL), pathOf(message.url))
  }
  installed.listeners.add(listener)
  // Held while recording: the flush message must keep the process alive until it arrives.
  installed.port.ref()

  const Module = requireBuiltin('node:module') as CommonJsModule
  const original = Module._resolveFilename
  const recording: CommonJsModule['_resolveFilename'] = function (this: unknown, request, parent, ...rest) {
    const filename = original.call(this, request, parent, ...rest)
    if (isAbsolute(filename)) add(request, parent?.filename ?? undefined, filename)
    return filename
  }
  Module._resolveFilename = recording

  let stopped: Promise<Resolution[]> | undefined
  return {
    stop: () => (stopped ??= stop()),
  }

  async function stop(): Promise<Resolution[]> {
    if (Module._resolveFilename === recording) Module._resolveFilename = original
    // Messages on one port arrive in order: once the flush module's resolution is here, so is
    // every resolution made before it.
    const done = new Promise<void>((resolve) => (flushed = resolve))
    try {
      await importModule(flush)
      await done
    } finally {
      installed.listeners.delete(listener)
      installed.port.unref()
    }
    return recorded
  }
}
