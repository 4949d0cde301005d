/**
 * The deny-write list every provider enforces inside a writable workspace: what a confined process
 * may not write, create, remove or rename, relative to each writable root. Shared so that each
 * provider's config has the same entries with the same defaults.
 */
import { isAbsolute, normalize } from 'node:path'
import { z } from 'zod'

/**
 * The default list (a trailing `/` marks a folder): shell and tool startup files, editors' and
 * agents' project configuration, git's hooks and config.
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
  '.mcp.json',
  '.vscode/',
  '.idea/',
  '.claude/',
  '.codex/',
  '.git/hooks/',
  '.git/config',
]

/** One deny-write entry: a path relative to a writable root, inside it (no `..`, not absolute); a trailing `/` is kept. */
export const denyWriteEntry = z
  .string()
  .min(1)
  .refine((path) => !isAbsolute(path) && !normalize(path).startsWith('..') && normalize(path) !== '.' && normalize(path) !== './', {
    message: 'must be a path relative to the workspace, inside it (e.g. .vscode/ or .git/hooks/)',
  })
  .transform((path) => normalize(path))
