/**
 * The deny-write list every provider enforces inside a writable workspace: what a confined process
 * may not write, create, remove or rename, relative to each writable root.
 */
import { readFileSync, statSync } from 'node:fs'
import { homedir } from 'node:os'
import { dirname, isAbsolute, join, normalize, relative, resolve, sep } from 'node:path'
import { z } from 'zod'
import { nodeBeneathFs, type BeneathFs } from '@conch/subprocess'
import { protectedPathProblem } from './protected.ts'
import { SandboxError, type SandboxPolicy } from './types.ts'

/**
 * The default list (a trailing `/` marks a folder): shell and tool startup files, editors' and
 * agents' project configuration, hook managers' files, git's hooks and config, and every file by
 * which git finds a config or hooks elsewhere (gitrepository-layout(5)). A `.git` that is a file is
 * held itself (`denyWritePaths`), as is every path the repository's git config names for hooks or
 * more config (`gitNamedPaths`). Why each entry is in or out: @conch/sandbox-local's README
 * ("Deny-write list").
 */
export const DEFAULT_DENY_WRITE = [
  '.bashrc',
  '.bash_profile',
  '.profile',
  '.zshrc',
  '.zprofile',
  '.gitconfig',
  '.gitmodules',
  '.ripgreprc',
  '.npmrc',
  '.mcp.json',
  '.vscode/',
  '.idea/',
  '.claude/',
  '.codex/',
  '.cursor/',
  '.gemini/',
  '.zed/',
  '.continue/',
  '.devcontainer/',
  '.husky/',
  '.pre-commit-config.yaml',
  '.lefthook.yml',
  '.git/hooks/',
  '.git/config',
  '.git/commondir',
  '.git/config.worktree',
  '.git/modules/',
  '.git/worktrees/',
]

/**
 * What a missing entry's placeholder file holds where an empty folder would disturb the host's
 * git, else undefined (an empty folder): git stops on a folder at `commondir` (one naming `.` is
 * the repository itself) and warns about one at `config.worktree` (an empty file is an empty config).
 */
export function placeholderContent(path: string): string | undefined {
  if (path.endsWith('/.git/commondir')) return '.\n'
  if (path.endsWith('/.git/config.worktree') || includedConfigs.has(path)) return ''
  return undefined
}

/** Config files git config includes (`gitNamedPaths`), held by an empty file: git stops on a folder named by `include.path`. */
const includedConfigs = new Set<string>()

/** Largest git config read for `gitNamedPaths`, bytes. */
const MAX_GIT_CONFIG_BYTES = 1 << 20

/** How deep git follows `include` directives (its config.c, `MAX_INCLUDE_DEPTH`). */
const MAX_INCLUDE_DEPTH = 10

/**
 * Paths inside `root` that git config names as where the host's git finds hooks or more config:
 * `core.hooksPath` (relative to the working tree) and `include.path` / `includeIf.<condition>.path`
 * (relative to the including file's folder; `~/` is the home folder), git-config(1). Read from the
 * repository's `<root>/.git/config` (when `.git` is a folder; its config is itself held), the
 * user's `~/.gitconfig` and `$XDG_CONFIG_HOME/git/config`, and every file they include, as deep as
 * git follows. A hook manager points git there (husky's `core.hooksPath = .husky/_`), and the
 * host's next `git commit` runs what is there.
 */
export function gitNamedPaths(root: string, home: string = homedir()): string[] {
  const xdg = process.env['XDG_CONFIG_HOME'] || join(home, '.config')
  const queue = [join(root, '.git', 'config'), join(home, '.gitconfig'), join(xdg, 'git', 'config')].map((file) => ({ file, depth: 0 }))
  const seen = new Set<string>()
  const named: string[] = []
  const at = (value: string, base: string) => (value.startsWith('~/') ? join(home, value.slice(2)) : resolve(base, value))
  for (let next = queue.shift(); next !== undefined; next = queue.shift()) {
    const { file, depth } = next
    if (seen.has(file)) continue
    seen.add(file)
    let text: string
    try {
      if (statSync(file).size > MAX_GIT_CONFIG_BYTES) continue
      text = readFileSync(file, 'utf8')
    } catch {
      continue
    }
    const { hooks, includes } = gitConfigPaths(text)
    named.push(...hooks.map((value) => at(value, root)))
    for (const path of includes.map((value) => at(value, dirname(file)))) {
      named.push(path)
      if (path.startsWith(root + sep)) includedConfigs.add(path)
      if (depth + 1 < MAX_INCLUDE_DEPTH) queue.push({ file: path, depth: depth + 1 })
    }
  }
  return named.filter((path) => path.startsWith(root + sep))
}

/**
 * The values of `core.hooksPath`, `include.path` and `includeIf.*.path` in git config text
 * (git-config(1): `[section "subsection"]` headers, `key = value` lines, double quotes with `\`
 * escapes, a `\` ending a line to continue it, `#` and `;` comments; names are case-insensitive).
 */
export function gitConfigPaths(text: string): { hooks: string[]; includes: string[] } {
  const hooks: string[] = []
  const includes: string[] = []
  let section = ''
  // A backslash at the end of a line continues the value on the next one.
  for (const raw of text.replace(/\\\r?\n/g, '').split('\n')) {
    let line = raw
    const header = /^\s*\[\s*([A-Za-z0-9.-]+)[^\]]*\](.*)$/.exec(line)
    if (header !== null) {
      section = header[1]!.toLowerCase()
      line = header[2]!
    }
    const entry = /^\s*([A-Za-z][A-Za-z0-9-]*)\s*=(.*)$/.exec(line)
    if (entry === null) continue
    const key = entry[1]!.toLowerCase()
    if (section === 'core' && key === 'hookspath') hooks.push(configValue(entry[2]!))
    else if ((section === 'include' || section === 'includeif') && key === 'path') includes.push(configValue(entry[2]!))
  }
  return { hooks: hooks.filter((value) => value !== ''), includes: includes.filter((value) => value !== '') }
}

/** A git config value as git reads it: quotes removed, escapes applied, a comment and outer blanks cut. */
function configValue(text: string): string {
  let out = ''
  let quoted = false
  let pending = ''
  for (let i = 0; i < text.length; i++) {
    const char = text[i]!
    if (char === '\\' && i + 1 < text.length) {
      const next = text[++i]!
      out += pending + (next === 'n' ? '\n' : next === 't' ? '\t' : next)
      pending = ''
    } else if (char === '"') {
      out += pending
      pending = ''
      quoted = !quoted
    } else if (!quoted && (char === '#' || char === ';')) break
    else if (!quoted && /\s/.test(char)) pending += out === '' ? '' : char
    else {
      out += pending + char
      pending = ''
    }
  }
  return out
}

/** One deny-write entry: a path relative to a writable root, inside it (no `..`, not absolute); a trailing `/` is kept. */
export const denyWriteEntry = z
  .string()
  .min(1)
  .refine((path) => !isAbsolute(path) && !normalize(path).startsWith('..') && normalize(path) !== '.' && normalize(path) !== './', {
    message: 'must be a path relative to the workspace, inside it (e.g. .vscode/ or .git/hooks/)',
  })
  .transform((path) => normalize(path))

/**
 * The absolute paths `denyWrite` names for `policy`, beneath the workspace and each of
 * `readWritePaths`, without trailing slashes, and those git config names there (`gitNamedPaths`). An entry beneath a file is that file: where `.git`
 * is a file (`gitdir: …`), it is what tells git where its config and hooks are.
 */
export function denyWritePaths(
  policy: Pick<SandboxPolicy, 'mode' | 'workspaceRoot'>,
  options: { denyWrite: readonly string[]; readWritePaths?: readonly string[] },
  fs: BeneathFs = nodeBeneathFs,
): string[] {
  if (policy.mode !== 'workspace-write') return []
  const roots = [policy.workspaceRoot, ...(options.readWritePaths ?? [])]
  return [
    ...new Set(
      roots.flatMap((root) => [...options.denyWrite.map((entry) => join(root, entry).replace(/\/+$/, '')), ...gitNamedPaths(root)].map((path) => fileOnTheWay(path, root, fs))),
    ),
  ]
}

/** The first regular file on `path` below `root` (lstat(2), the last component excluded), else `path`. */
function fileOnTheWay(path: string, root: string, fs: BeneathFs): string {
  let current = root
  for (const part of relative(root, path).split(sep).slice(0, -1)) {
    current = join(current, part)
    try {
      if (fs.lstat(current).isFile()) return current
    } catch {
      return path
    }
  }
  return path
}

/**
 * The first symbolic link on `path` below `root`, looked at component by component with lstat(2)
 * (the last one included; nothing past a missing one), or undefined.
 */
export function symlinkBeneath(path: string, root: string, fs: BeneathFs = nodeBeneathFs): { link: string; target: string } | undefined {
  let current = root
  for (const part of relative(root, path).split(sep).filter((segment) => segment !== '')) {
    current = join(current, part)
    let stat
    try {
      stat = fs.lstat(current)
    } catch {
      return undefined
    }
    if (stat.isSymbolicLink()) return { link: current, target: fs.readlink(current) }
  }
  return undefined
}

/**
 * Refuses a deny-write path reached through a symbolic link below its writable root
 * (`PROTECTED_PATH_SYMLINK`: a mount covers the target, not the link a confined process could
 * replace) and a file with another hard link there (`PROTECTED_PATH_LINKED`).
 */
export function checkDenyWritePaths(paths: readonly string[], roots: readonly string[], fs: BeneathFs = nodeBeneathFs): void {
  for (const path of paths) {
    const root = roots.find((candidate) => path.startsWith(candidate + sep))
    const found = root === undefined ? undefined : symlinkBeneath(path, root, fs)
    if (found === undefined) continue
    throw new SandboxError('PROTECTED_PATH_SYMLINK', {
      reason:
        `cannot confine: ${found.link} is a symbolic link (-> ${found.target}) inside the writable ${root}, and ${path} is on the deny-write list: ` +
        `a confined process could replace the link and write what the host reads there. Put the folder or file itself in place of the link, ` +
        `or remove ${relative(root!, path)} from denyWrite in the sandbox provider's config (sandbox-local or sandbox-docker)`,
    })
  }
  const problem = protectedPathProblem(
    paths.map((path) => ({ given: path, canonical: path })),
    roots,
    fs,
  )
  if (problem !== undefined) throw new SandboxError(problem.code, { reason: problem.message })
}
