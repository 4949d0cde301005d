/**
 * Command-line parsing (node:util `parseArgs`, strict). Every error names the flag.
 */
import { existsSync, statSync } from 'node:fs'
import { resolve } from 'node:path'
import { fileURLToPath } from 'node:url'
import { parseArgs } from 'node:util'
import type { LogLevel } from './boot.ts'
import { CliError } from './errors.ts'
import { realpathOf } from './protect.ts'
import { nearestName } from './suggest.ts'
import type { OutputFormat } from './transcript.ts'

export const USAGE = `Usage: conch <command> [options]

Commands:
  run [options] "task"   run one task to completion with a headless agent and print the transcript
  acp [options]          serve the Agent Client Protocol over stdio (for editors such as Zed)
  gc [options]           remove what conchs that were killed left of their sandboxes
  pool-worker            host the PTY pool for a supervising conch (started by @conch/pty-pool)

Options:
  -h, --help             show this help; conch run --help shows the run options

run and acp boot a composition, gc its sandbox rows: --config FILE, else conch's own root
cordis.yml (said on stderr). A ./cordis.yml is loaded only when named (--config ./cordis.yml): a
composition runs as host code, and the folder may be the agent's; see docs/configuration.md for
its format.`

export const RUN_USAGE = `Usage: conch run [--config FILE] [--script FILE] [--output text|stream-json [--partial]] [--cwd DIR] [--log-level LEVEL] "task"

Boots the composition, creates one agent, runs the task until the model answers, prints, and
shuts everything down.

Options:
  --config FILE        composition to boot (default: conch's own; a ./cordis.yml only when named)
  --script FILE        use the scripted model with this JSON Lines script (one model reply per
                       line), whatever the composition says; no API key needed
  --output FORMAT      text (default): a readable transcript, with terminal output shown live
                       as it arrives; stream-json: one JSON object per line (tool_call,
                       tool_result, assistant, notification, waiting, then result)
  --partial            with stream-json: also emit {"type":"tool_output","id","text"} lines
                       with a tool's live output before its tool_result
  --cwd DIR            the agent's workspace root (default: the current directory)
  --log-level LEVEL    error, warn (default), info or debug; diagnostics go to stderr
  -h, --help           show this help

The live model: DEEPSEEK_API_KEY goes to DeepSeek, OPENAI_API_KEY to OpenAI (or to
OPENAI_BASE_URL); CONCH_BASE_URL and CONCH_MODEL name any OpenAI-compatible server instead.
Exit status: 0 when the run completed; 1 when it ended otherwise or the composition did not
start; 2 for a usage error, a missing API key, no working sandbox (bubblewrap) or a --cwd
every user shares (such as /tmp) when the terminals are confined; 130 / 143 after SIGINT / SIGTERM.`

export const ACP_USAGE = `Usage: conch acp [--config FILE] [--script FILE] [--log-level LEVEL]

Serves the Agent Client Protocol over stdio: stdout carries protocol frames only, diagnostics
go to stderr.

Options:
  --config FILE        composition to boot (default: conch's own; a ./cordis.yml only when named)
  --script FILE        use the scripted model with this JSON Lines script
  --log-level LEVEL    error, warn (default), info or debug
  -h, --help           show this help

Exit status: 0 when the client closed stdin or after SIGTERM / SIGINT, once every agent and
terminal is disposed; 1 when the composition did not start; 2 for a usage error, a missing
API key, or no working sandbox (bubblewrap) when the terminals are confined.`

export const GC_USAGE = `Usage: conch gc [--config FILE] [--output text|json]

Removes what conch processes that are gone (killed with SIGKILL, before their teardown) left of
their agents' sandboxes, with the providers the composition loads: @conch/sandbox-docker's
labelled containers and the folders they held, @conch/sandbox-local's agent folders and their
network pins. What a running conch holds is left alone; a conch also sweeps so before it makes
an agent's sandbox.

Options:
  --config FILE        composition whose sandbox providers sweep (default: conch's own)
  --output FORMAT      text (default): one line per thing removed; json: one object,
                       {"removed":[{"provider","kind","name"}]}
  -h, --help           show this help

Exit status: 0 when the sweep ran (whether or not it removed anything); 1 when a provider could
not sweep (a Docker daemon that does not answer); 2 for a usage error.`

export const POOL_WORKER_USAGE = `Usage: conch pool-worker

Hosts the warm sessions of the PTY pool (@conch/pty-pool, worker: managed) for the conch process
that started it. Not for direct use: it speaks line-delimited JSON on fd 3 and expects that
process on the other end; stdout stays empty and diagnostics go to stderr.

Exit status: 0 after SIGTERM, SIGINT or the end of the channel, once every session is closed.`

/** Where the composition comes from: `--config`, else conch's own (see `composition`). */
export interface CompositionArgs {
  /** Absolute path of the composition. */
  config: string
  /** Set when no `--config` was given and `config` is conch's own (`OWN_COMPOSITION`) from another folder. */
  ownComposition?: true
  /** With `ownComposition`: the working directory's cordis.yml, which was not loaded. */
  ignored?: string
}

export interface RunArgs extends CompositionArgs {
  task: string
  /** Absolute path of the script, when given. */
  script?: string
  output: OutputFormat
  /** `--partial`: stream-json also carries live tool output (`tool_output` lines). Only set when given. */
  partial?: true
  /** Absolute, existing directory. */
  cwd: string
  /** Whether `--cwd` was given (else `cwd` is the working directory). Only set when given. */
  cwdGiven?: true
  logLevel: LogLevel
}

export interface GcArgs extends CompositionArgs {
  output: 'text' | 'json'
}

export interface AcpArgs extends CompositionArgs {
  script?: string
  logLevel: LogLevel
}

const LOG_LEVELS: readonly LogLevel[] = ['error', 'warn', 'info', 'debug']
const OUTPUTS: readonly OutputFormat[] = ['text', 'stream-json']

/**
 * Parses `conch run` arguments (after `run`). Returns `'help'` for `--help`.
 * @throws CliError `USAGE` naming the flag or the missing task.
 */
export function parseRunArgs(argv: readonly string[], cwd = process.cwd()): RunArgs | 'help' {
  const { values, positionals } = parse(argv, {
    config: { type: 'string' },
    script: { type: 'string' },
    output: { type: 'string' },
    partial: { type: 'boolean' },
    cwd: { type: 'string' },
    'log-level': { type: 'string' },
    help: { type: 'boolean', short: 'h' },
  })
  if (values['help']) return 'help'
  if (positionals.length === 0) throw usage('conch run: missing the task; give it as one quoted argument, e.g. conch run "list the files"')
  if (positionals.length > 1) {
    throw usage(`conch run: expected one task argument, got ${positionals.length}; quote the task: conch run "${positionals.join(' ')}"`)
  }
  const output = oneOf('--output', values['output'], OUTPUTS, 'text')
  const args: RunArgs = {
    task: positionals[0]!,
    ...composition(values['config'], cwd),
    output,
    cwd: values['cwd'] === undefined ? cwd : existing('--cwd', stringFlag('--cwd', values['cwd'])!, cwd, 'directory'),
    logLevel: oneOf('--log-level', values['log-level'], LOG_LEVELS, 'warn'),
  }
  if (values['cwd'] !== undefined) args.cwdGiven = true
  const script = stringFlag('--script', values['script'])
  if (script !== undefined) args.script = existing('--script', script, cwd, 'file')
  if (values['partial'] === true) {
    if (output !== 'stream-json') throw usage('conch run: --partial needs --output stream-json (the text transcript always shows live output)')
    args.partial = true
  }
  return args
}

/**
 * Parses `conch acp` arguments (after `acp`). Returns `'help'` for `--help`.
 * @throws CliError `USAGE` naming the flag.
 */
export function parseAcpArgs(argv: readonly string[], cwd = process.cwd()): AcpArgs | 'help' {
  const { values, positionals } = parse(argv, {
    config: { type: 'string' },
    script: { type: 'string' },
    'log-level': { type: 'string' },
    help: { type: 'boolean', short: 'h' },
  })
  if (values['help']) return 'help'
  if (positionals.length) throw usage(`conch acp: unexpected argument ${JSON.stringify(positionals[0])}; conch acp takes options only`)
  const args: AcpArgs = {
    ...composition(values['config'], cwd),
    logLevel: oneOf('--log-level', values['log-level'], LOG_LEVELS, 'warn'),
  }
  const script = stringFlag('--script', values['script'])
  if (script !== undefined) args.script = existing('--script', script, cwd, 'file')
  return args
}

/**
 * Parses `conch gc` arguments (after `gc`). Returns `'help'` for `--help`.
 * @throws CliError `USAGE` naming the flag.
 */
export function parseGcArgs(argv: readonly string[], cwd = process.cwd()): GcArgs | 'help' {
  const { values, positionals } = parse(argv, {
    config: { type: 'string' },
    output: { type: 'string' },
    help: { type: 'boolean', short: 'h' },
  })
  if (values['help']) return 'help'
  if (positionals.length) throw usage(`conch gc: unexpected argument ${JSON.stringify(positionals[0])}; conch gc takes options only`)
  return { ...composition(values['config'], cwd), output: oneOf('--output', values['output'], ['text', 'json'] as const, 'text') }
}

/** conch's own root composition: the cordis.yml of the checkout this module runs from (packages/cli/src, or the build in packages/cli/dist). */
export const OWN_COMPOSITION = fileURLToPath(new URL('../../../cordis.yml', import.meta.url))

/**
 * `--config` when given; else conch's own composition. A `./cordis.yml` is never loaded unnamed
 * (it runs as host code, and the working folder may be a hostile repository's, or one a confined
 * terminal wrote), except when it is conch's own (in the checkout, same real path). It is then
 * reported as `ignored`.
 * @throws CliError `USAGE` when there is neither `--config` nor conch's own composition.
 */
function composition(flag: unknown, cwd: string): CompositionArgs {
  const given = stringFlag('--config', flag)
  if (given !== undefined) return { config: resolve(cwd, given) }
  const local = resolve(cwd, 'cordis.yml')
  const own = realpathOf(OWN_COMPOSITION)
  if (own === undefined) throw usage(`conch's own composition ${OWN_COMPOSITION} is missing; name one with --config FILE`)
  if (realpathOf(local) === own) return { config: local }
  return { config: OWN_COMPOSITION, ownComposition: true, ...(existsSync(local) ? { ignored: local } : {}) }
}

type Options = NonNullable<Parameters<typeof parseArgs>[0]>['options']

function parse(argv: readonly string[], options: Options): { values: Record<string, unknown>; positionals: string[] } {
  try {
    const { values, positionals } = parseArgs({ args: [...argv], options, strict: true, allowPositionals: true })
    return { values: values as Record<string, unknown>, positionals }
  } catch (error) {
    const code = (error as { code?: string }).code
    const message = (error as Error).message
    if (code === 'ERR_PARSE_ARGS_UNKNOWN_OPTION') {
      const flag = /'([^']+)'/.exec(message)?.[1] ?? message
      const near = flag.startsWith('--') ? nearestName(flag.slice(2), Object.keys(options ?? {})) : undefined
      throw usage(`unknown option ${flag}${near === undefined ? '' : ` (did you mean --${near}?)`}; see --help`)
    }
    if (code === 'ERR_PARSE_ARGS_INVALID_OPTION_VALUE') {
      const flag = /'(--[a-z-]+)/.exec(message)?.[1] ?? 'an option'
      throw usage(`${flag} needs a value; see --help`)
    }
    throw usage(message)
  }
}

function stringFlag(flag: string, value: unknown): string | undefined {
  if (value === undefined) return undefined
  if (typeof value !== 'string' || value === '') throw usage(`${flag} needs a value; see --help`)
  return value
}

function oneOf<T extends string>(flag: string, value: unknown, allowed: readonly T[], fallback: T): T {
  const text = stringFlag(flag, value)
  if (text === undefined) return fallback
  if (!(allowed as readonly string[]).includes(text)) {
    throw usage(`${flag} must be ${allowed.slice(0, -1).join(', ')} or ${allowed[allowed.length - 1]}, got ${JSON.stringify(text)}`)
  }
  return text as T
}

/** `value` resolved against `cwd`, which must name an existing `kind`. */
function existing(flag: string, value: string, cwd: string, kind: 'directory' | 'file'): string {
  const path = resolve(cwd, value)
  let isKind = false
  try {
    const stat = statSync(path)
    isKind = kind === 'directory' ? stat.isDirectory() : stat.isFile()
  } catch {
    throw usage(`${flag} ${value}: no such ${kind}`)
  }
  if (!isKind) throw usage(`${flag} ${value}: not a ${kind}`)
  return path
}

function usage(message: string): CliError {
  return new CliError('USAGE', { reason: message })
}
