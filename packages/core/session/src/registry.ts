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
