/**
 * Spares: at most one booted process per key — (owner, mode, workspace root, cwd, heap) —
 * waiting for its program, so a run skips the cold start. A spare runs one program; it expires
 * after `spareIdleMs`, and closes with its owner or the runtime; it is never handed to another owner.
 */
import type { PtcOwner } from '@conch/ptc'
import type { ProgramProcess } from './process.ts'

interface Spare {
  process: Promise<ProgramProcess>
  timer: NodeJS.Timeout
}

export class SparePool {
  private readonly byOwner = new Map<PtcOwner, Map<string, Spare>>()
  private readonly watched = new WeakSet<PtcOwner>()
  private readonly closing = new Set<Promise<unknown>>()
  private disposed = false

  constructor(private readonly idleMs: number) {}

  /** The owner's spare for `key` (booted or booting), removed from the pool; undefined when there is none. */
  async take(owner: PtcOwner, key: string): Promise<ProgramProcess | undefined> {
    const spares = this.byOwner.get(owner)
    const spare = spares?.get(key)
    if (spare === undefined) return undefined
    spares!.delete(key)
    clearTimeout(spare.timer)
    const process = await spare.process.catch(() => undefined)
    if (process === undefined) return undefined
    if (!process.available) {
      this.close(Promise.resolve(process))
      return undefined
    }
    return process
  }

  /** Starts a spare for `key` unless one exists; a failure is dropped (the next run starts cold and reports it). */
  refill(owner: PtcOwner, key: string, start: () => Promise<ProgramProcess>): void {
    if (this.disposed || owner.state !== 'live') return
    if (!this.watched.has(owner)) {
      try {
        owner.onDispose(() => this.closeOwner(owner))
      } catch {
        return
      }
      this.watched.add(owner)
    }
    let spares = this.byOwner.get(owner)
    if (spares === undefined) this.byOwner.set(owner, (spares = new Map()))
    if (spares.has(key)) return
    let process: Promise<ProgramProcess>
    try {
      process = start()
    } catch {
      return
    }
    process.catch(() => {
      if (spares.get(key)?.process === process) spares.delete(key)
    })
    const timer = setTimeout(() => {
      if (spares.get(key)?.process !== process) return
      spares.delete(key)
      this.close(process)
    }, this.idleMs)
    timer.unref()
    spares.set(key, { process, timer })
  }

  /** How many spares exist now (booted or booting). */
  get size(): number {
    let count = 0
    for (const spares of this.byOwner.values()) count += spares.size
    return count
  }

  /** Closes the owner's spares and waits until their trees are gone. */
  async closeOwner(owner: PtcOwner): Promise<void> {
    const spares = this.byOwner.get(owner)
    this.byOwner.delete(owner)
    await Promise.all([...(spares?.values() ?? [])].map((spare) => {
      clearTimeout(spare.timer)
      return this.close(spare.process)
    }))
  }

  /** Closes every spare, refuses new ones, and waits for all closes (idle expiries included). */
  async dispose(): Promise<void> {
    this.disposed = true
    await Promise.all([...this.byOwner.keys()].map((owner) => this.closeOwner(owner)))
    await Promise.all([...this.closing])
  }

  private close(process: Promise<ProgramProcess>): Promise<unknown> {
    const closing = process.then((started) => started.terminate(), () => undefined)
    this.closing.add(closing)
    void closing.finally(() => this.closing.delete(closing))
    return closing
  }
}
