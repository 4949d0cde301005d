import { realpathSync } from 'node:fs'
import { homedir, tmpdir } from 'node:os'
import { isAbsolute, normalize } from 'node:path'
import { DEFAULT_DENY_WRITE, denyWriteEntry, maxExposedPorts, workspaceRootProblem } from '@conch/sandbox'
import { z } from 'zod'

/**
 * What of the real home is bound read-only into the private home by default (relative to it):
 * configuration dotfiles, and the toolchains people install there (pyenv, rustup and cargo, nvm,
 * volta, user-installed Python packages and scripts). Folders on PATH that lie in the home are
 * bound too, whether listed or not.
 */
export const DEFAULT_HOME_READ_ONLY = [
  '.gitconfig',
  '.config/git',
  '.gitignore_global',
  '.bashrc',
  '.bash_profile',
  '.bash_aliases',
  '.profile',
  '.inputrc',
  '.editorconfig',
  '.vimrc',
  '.vim',
  '.config/nvim',
  '.nanorc',
  '.emacs',
  '.emacs.d',
  '.tmux.conf',
  '.pyenv',
  '.cargo',
  '.rustup',
  '.nvm',
  '.volta',
  '.local/bin',
  '.local/lib',
]

/** Credential locations masked by default under confined modes (`~/` is the home directory). */
export const DEFAULT_DENY_READ = [
  '~/.ssh',
  '~/.aws',
  '~/.config/gcloud',
  '~/.azure',
  '~/.kube',
  '~/.docker/config.json',
  '~/.netrc',
  '~/.npmrc',
  '~/.pypirc',
  '~/.git-credentials',
  '~/.gnupg',
  '~/.config/gh',
  '~/.cargo/credentials',
  '~/.cargo/credentials.toml',
]

/** A path relative to the home directory, inside it (no `..`, not absolute). */
const homeRelative = z
  .string()
  .min(1)
  .refine((path) => !isAbsolute(path) && !normalize(path).startsWith('..') && normalize(path) !== '.', {
    message: 'must be a path relative to the home directory, inside it (e.g. .gitconfig)',
  })
  .transform((path) => normalize(path).replace(/\/$/, ''))

/** An absolute path, or `~/…` relative to the home directory. */
const homeOrAbsolute = z
  .string()
  .min(1)
  .refine((path) => isAbsolute(path) || (path.startsWith('~/') && path.length > 2), {
    message: 'must be an absolute path or start with ~/',
  })

/** An absolute path that exists now, made canonical (symlinks resolved) at load. */
const existingPath = z
  .string()
  .refine((path) => isAbsolute(path), { message: 'must be an absolute path' })
  .transform((path, ctx) => {
    try {
      return realpathSync(path)
    } catch {
      ctx.issues.push({ code: 'custom', message: `${path} does not exist`, input: path })
      return z.NEVER
    }
  })

export const Config = z
  .strictObject({
    network: z
      .boolean()
      .default(false)
      .describe(
        'Whether confined processes whose confinement names no agent network may use the network; false (the default) gives them no interface but loopback. ' +
          "An agent's network is sandbox-policy's network; a caller may override either per confinement (SandboxPolicy.network).",
      ),
    readWritePaths: z
      .array(existingPath.check((ctx) => {
        // Writable like the workspace, so judged by the workspace rule (conch's own folders are
        // hidden or kept read-only by the sandbox wherever they lie).
        const problem = workspaceRootProblem(ctx.value)
        if (problem !== undefined) ctx.issues.push({ code: 'custom', message: `${ctx.value} cannot be made writable: ${problem}`, input: ctx.value })
      }))
      .default([])
      .describe(
        'Extra absolute paths writable under workspace-write (bound read-only under read-only); each is refused at load like a ' +
          'workspace root (system folders such as /run, homes themselves and their dot-folders, shared temporary folders).',
      ),
    readOnlyPaths: z
      .array(existingPath)
      .default([])
      .describe('Absolute paths kept read-only even inside a writable path (e.g. the workspace .git).'),
    runnerCommand: z
      .string()
      .min(1)
      .default('bwrap')
      .describe('The bubblewrap executable, or another bubblewrap-compatible runner (Linux).'),
    sandboxExecCommand: z
      .string()
      .min(1)
      .default('/usr/bin/sandbox-exec')
      .describe('The sandbox-exec executable (macOS).'),
    privateHome: z
      .boolean()
      .default(true)
      .describe('Give confined processes a private, writable, empty home (a tmpfs at homeDir) instead of the real one (Linux).'),
    homeDir: z
      .string()
      .refine((path) => isAbsolute(path), { message: 'must be an absolute path' })
      .default(() => homedir())
      .describe('The home directory the private home replaces; default: the home of the user running conch.'),
    homeReadOnly: z
      .array(homeRelative)
      .default(DEFAULT_HOME_READ_ONLY)
      .describe(
        'Files and folders of the real home bound read-only into the private home, relative to it (those that exist); ' +
          'folders on PATH inside the home are bound too.',
      ),
    denyRead: z
      .array(homeOrAbsolute)
      .default(DEFAULT_DENY_READ)
      .describe('Paths confined processes cannot read (masked by an empty file or folder; those that exist); ~/ is homeDir.'),
    denyWrite: z
      .array(denyWriteEntry)
      .default(DEFAULT_DENY_WRITE)
      .describe(
        'Paths confined processes cannot write, create, remove or rename under workspace-write, relative to the workspace root and ' +
          'each readWritePaths entry (a trailing / marks a folder); a missing one is held by an empty folder while conch runs.',
      ),
    runtimeDir: z
      .string()
      .refine((path) => isAbsolute(path), { message: 'must be an absolute path' })
      .default(() => tmpdir())
      .describe('Where the host keeps the files bubblewrap reads (the seccomp filter); a private folder is made inside.'),
    maxExposedPorts,
    probeTimeoutMs: z
      .number()
      .int()
      .positive()
      .default(10_000)
      .describe('How long the one-time probe of a runner may take, in ms.'),
  })
  .prefault({})

export type Config = z.output<typeof Config>

export { DEFAULT_DENY_WRITE }
