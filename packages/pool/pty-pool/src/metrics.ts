/**
 * The pool's Prometheus metrics (prom-client), on a registry of its own so two pools in one
 * process never collide. Names are part of the contract (see the package README).
 */
import { Counter, Gauge, Histogram, Registry } from 'prom-client'
import { FAILURE_REASONS } from './errors.ts'

export class PoolMetrics {
  readonly registry = new Registry()
  readonly cacheHits = this.counter('pty_pool_acquires_cache_hit_total', 'Acquires served by a warm session')
  readonly spawns = this.counter('pty_pool_acquires_spawn_total', 'Acquires that booted a new session')
  readonly evictedIdle = this.counter('pty_pool_evicted_idle_total', 'Sessions evicted for idleness or by LRU')
  readonly evictedUnhealthy = this.counter('pty_pool_evicted_unhealthy_total', 'Sessions evicted because they were unhealthy')
  readonly evictedShutdown = this.counter('pty_pool_evicted_shutdown_total', 'Sessions closed by shutdown')
  readonly invokesOk = this.counter('pty_pool_invokes_ok_total', 'Invokes answered by the pool with text')
  readonly invokesEmpty = this.counter('pty_pool_invokes_empty_total', 'Invokes answered by the pool with an empty answer')
  readonly fallbacks = new Counter({ name: 'pty_pool_fallbacks_total', help: 'Invokes that fell back to a fresh spawn, by reason', labelNames: ['reason'] as const, registers: [this.registry] })
  readonly invokeDuration = new Histogram({
    name: 'pty_pool_invoke_duration_seconds',
    help: 'Time of one pooled invoke, fallback included',
    buckets: [0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 1800],
    registers: [this.registry],
  })
  readonly healthMisses = this.counter('worker_health_misses_total', 'Health pings the managed worker did not answer in time')
  readonly restarts = this.counter('worker_restarts_total', 'Restarts of the managed worker')
  readonly managedWorkerActive = new Gauge({ name: 'pty_pool_managed_worker_active', help: '1 when the pool runs in a managed worker process, else 0', registers: [this.registry] })

  constructor() {
    // Every reason is exported from the start, at 0, so a scrape shows the full set.
    for (const reason of FAILURE_REASONS) this.fallbacks.inc({ reason }, 0)
  }

  private counter(name: string, help: string): Counter {
    return new Counter({ name, help, registers: [this.registry] })
  }

  /** The counters of the status endpoint, by their names without the `pty_pool_` prefix. */
  async snapshot(): Promise<Record<string, number>> {
    const out: Record<string, number> = {}
    for (const metric of await this.registry.getMetricsAsJSON()) {
      if (String(metric.type) !== 'counter' || metric.name === 'pty_pool_fallbacks_total') continue
      out[metric.name.replace(/^pty_pool_/, '')] = metric.values.reduce((sum, value) => sum + value.value, 0)
    }
    return out
  }

  async fallbacksByReason(): Promise<Record<string, number>> {
    const metric = (await this.registry.getMetricsAsJSON()).find((entry) => entry.name === 'pty_pool_fallbacks_total')
    const out: Record<string, number> = {}
    for (const value of metric?.values ?? []) out[String(value.labels.reason)] = value.value
    return out
  }
}
