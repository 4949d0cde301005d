'use strict'
// Loaded first by every node process of a sandbox whose network is an allowlist
// (`NODE_OPTIONS=--require <this file>`, set with the proxy's variables by `proxyEnvironment`,
// egress-proxy.ts). Node's own fetch honours HTTP_PROXY and kin only from Node 22.21 and 24 on
// (NODE_USE_ENV_PROXY=1); before, and with the variables set, fetch's first call sets undici's
// EnvHttpProxyAgent as the global dispatcher that Node's fetch reads
// (`Symbol.for('undici.globalDispatcher.1')`), or rejects saying why rather than go direct.
// undici is loaded from the absolute folder in NODE_PROXY_UNDICI, on first use (some 60 ms).
// Nothing here may throw: a node program must start whatever this file finds. Written for any
// Node that reads NODE_OPTIONS (a container's own node may be old).
;(function routeFetch() {
  try {
    var env = process.env
    var version = String(process.versions.node).split('.').map(Number)
    if (version[0] >= 24 || (version[0] === 22 && version[1] >= 21)) return
    // Taken now: a program that rewrites the variables later does not move its fetch.
    var options = { httpProxy: env.HTTP_PROXY || env.http_proxy || '', httpsProxy: env.HTTPS_PROXY || env.https_proxy || '', noProxy: env.NO_PROXY || env.no_proxy || '' }
    if (options.httpProxy === '' && options.httpsProxy === '') return
    var builtin = globalThis.fetch
    if (typeof builtin !== 'function') return
    var folder = env.NODE_PROXY_UNDICI
    var routed
    var route = function () {
      if (routed !== undefined) return routed
      try {
        if (!folder || folder.charAt(0) !== '/') throw new Error('NODE_PROXY_UNDICI names no absolute folder')
        var undici = require(folder)
        // Its "experimental" warning would land in the program's stderr: not the program's doing.
        var emitWarning = process.emitWarning
        process.emitWarning = function (warning, detail) {
          if (!(detail && detail.code === 'UNDICI-EHPA')) emitWarning.apply(process, arguments)
        }
        try {
          undici.setGlobalDispatcher(new undici.EnvHttpProxyAgent(options))
        } finally {
          process.emitWarning = emitWarning
        }
        routed = { ok: true }
      } catch (error) {
        var message = error && error.message ? error.message : String(error)
        routed = { ok: false, message: 'fetch cannot go through the network proxy (' + (options.httpsProxy || options.httpProxy) + '): undici is not loadable here: ' + message }
      }
      return routed
    }
    Object.defineProperty(globalThis, 'fetch', {
      configurable: true,
      enumerable: true,
      writable: true,
      value: function fetch(input, init) {
        var outcome = route()
        return outcome.ok ? builtin(input, init) : Promise.reject(new TypeError(outcome.message))
      },
    })
  } catch (error) {
    // leave fetch as Node made it
  }
})()
