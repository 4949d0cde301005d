import type { Context } from 'cordis'

/**
 * Registers `value` under `key` in `map` for the lifetime of the plugin that `ctx` belongs to (a
 * Cordis effect), refusing a key already taken with the error `duplicate()` builds; the disposer
 * removes the entry while it is still `value`. `label` names the effect (`llm.register(openai)`).
 */
export function registerUnique<K, V>(ctx: Context, map: Map<K, V>, key: K, value: V, duplicate: () => Error, label: string): () => void {
  return ctx.effect(() => {
    if (map.has(key)) throw duplicate()
    map.set(key, value)
    return () => {
      if (map.get(key) === value) map.delete(key)
    }
  }, label)
}

/** Appends `item` to `list` for the lifetime of the plugin that `ctx` belongs to; the disposer takes it out. */
export function registerListed<T>(ctx: Context, list: T[], item: T, label: string): () => void {
  return ctx.effect(() => {
    list.push(item)
    return () => {
      const index = list.indexOf(item)
      if (index >= 0) list.splice(index, 1)
    }
  }, label)
}
