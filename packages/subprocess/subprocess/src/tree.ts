import type { ProcessEntry } from './types.ts'

/**
 * The descendants of `rootPid` in `entries` by `ppid`, children before their parents, so leaves
 * stop first while their parents can still reap them; re-parented processes are not included
 * (find those by tag). With `includeRoot`, the root entry (when listed) comes last.
 */
export function treeOf(entries: readonly ProcessEntry[], rootPid: number, options: { includeRoot: boolean }): ProcessEntry[] {
  const children = new Map<number, ProcessEntry[]>()
  let root: ProcessEntry | undefined
  for (const entry of entries) {
    if (entry.pid === rootPid) root = entry
    // The kernel's own roots (pid 0 as the parent of init and kthreadd) are never descendants.
    if (entry.pid === entry.ppid) continue
    const siblings = children.get(entry.ppid)
    if (siblings) siblings.push(entry)
    else children.set(entry.ppid, [entry])
  }

  const out: ProcessEntry[] = []
  const seen = new Set<number>([rootPid])
  const visit = (pid: number): void => {
    for (const child of children.get(pid) ?? []) {
      if (seen.has(child.pid)) continue
      seen.add(child.pid)
      visit(child.pid)
      out.push(child)
    }
  }
  visit(rootPid)
  if (options.includeRoot && root) out.push(root)
  return out
}
