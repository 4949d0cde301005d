/**
 * The built-in CLI kinds, config like any other (`kinds.<name>` overrides single fields). Both
 * CLIs submit only when Enter arrives as its own write and show "esc to interrupt" while they
 * work. Codex holds keys typed faster than 8 ms apart as a possible unbracketed paste
 * (codex-rs/tui/src/bottom_pane/paste_burst.rs), hence `paste: always` for it.
 */
import { productsEnv, resolveClaudeExecutable, resolveCodexExecutable } from '@conch/subagent'
import type { KindInput } from './config.ts'

/**
 * A `Stop` hook that appends its input, one JSON line holding the turn's final text, to a file of
 * the private home. Claude Code writes its transcript on a 100 ms flush timer, but flushes it at
 * once before it runs a `Stop` hook, so the hook's line is the turn's earliest exact answer.
 */
const claudeStopHook = JSON.stringify({
  hooks: { Stop: [{ hooks: [{ type: 'command', command: 'f="$CLAUDE_CONFIG_DIR/stop/stop.jsonl"; cat >> "$f"; echo >> "$f"' }] }] },
})

const claude: KindInput = {
  command: 'claude',
  args: ['--permission-mode', 'dontAsk', '--strict-mcp-config', '--setting-sources', '', '--settings', claudeStopHook],
  instructionFlag: '--append-system-prompt',
  modelFlag: '--model',
  // Minimal mode: no hooks, plugins, memory or CLAUDE.md discovery; API-key auth only (claude --help).
  bareArgs: ['--bare'],
  files: {
    '.claude/stop/stop.jsonl': '',
    '.claude/.claude.json': '{"hasCompletedOnboarding":true,"customApiKeyResponses":{"approved":["{apiKeyTail}"],"rejected":[]},"projects":{{cwdJson}:{"hasTrustDialogAccepted":true}}}',
  },
  env: {
    HOME: '{home}',
    CLAUDE_CONFIG_DIR: '{home}/.claude',
    CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC: '1',
  },
  passEnv: ['ANTHROPIC_BASE_URL', 'ANTHROPIC_API_KEY'],
  readyPattern: '^❯\\s',
  busyPattern: 'esc to interrupt',
  statusPattern: '^\\s*[✻✽✶✳✢·*●◐◓◑◒⏺]?\\s*\\S*…|esc to interrupt|^\\s*⏵⏵|/effort',
  tokenPattern: '([0-9][0-9.,]*k?) tokens',
  answerPrefix: '^\\s*[●⏺]\\s?',
  dialogPattern: 'Do you trust|Yes, proceed|Detected a custom API key|Select login method|Choose the text style',
  pasteCollapseChars: 800,
  transcript: { format: 'claude-stop', dir: '{home}/.claude/stop' },
  bareTranscript: { format: 'claude-jsonl', dir: '{home}/.claude/projects' },
  oneShotArgs: ['-p', '{prompt}', '--permission-mode', 'dontAsk', '--setting-sources', ''],
  fallbackProvider: 'claude-code',
}

const codex: KindInput = {
  command: 'codex',
  args: ['--no-daemon'],
  defaultModel: 'gpt-6-sol',
  files: {
    '.codex/config.toml': [
      'model = {modelJson}',
      'developer_instructions = {instructionJson}',
      'check_for_update_on_startup = false',
      '[analytics]',
      'enabled = false',
      '[feedback]',
      'enabled = false',
      '[projects.{cwdJson}]',
      'trust_level = "trusted"',
      '',
    ].join('\n'),
  },
  env: {
    HOME: '{home}',
    CODEX_HOME: '{home}/.codex',
  },
  passEnv: ['OPENAI_API_KEY'],
  readyPattern: '^›\\s',
  busyPattern: 'esc to interrupt',
  statusPattern: 'esc to interrupt|^\\s*• Working|Worked for|^\\s*GPT-|for shortcuts|for agents',
  answerPrefix: '^\\s*•\\s?',
  dialogPattern: 'Try new model|Do you trust|Sign in with ChatGPT|Allow Codex to work',
  paste: 'always',
  pasteCollapseChars: 1000,
  transcript: { format: 'codex-rollout', dir: '{home}/.codex/sessions' },
  oneShotArgs: ['exec', '--skip-git-repo-check', '{prompt}'],
  fallbackProvider: 'codex',
}

/** Any line-oriented REPL: configure command, patterns and how the sentinel is instructed. */
const generic: KindInput = {
  command: 'sh',
  readyPattern: '\\S',
  busyPattern: '(?!x)x',
}

export const BUILTIN_KINDS: Record<string, KindInput> = { claude, codex, generic }

/**
 * Where a built-in kind's binary is when its `command` is not configured: the search the sub-agent
 * providers use (`.products/`, then `PATH` outside the folders agents may write, `writable`), so
 * the pool runs the binary its fresh-spawn path runs.
 */
export function findBuiltinCommand(kind: string, env: Readonly<Record<string, string | undefined>>, writable: readonly string[] = []): string | undefined {
  if (kind === 'claude') return resolveClaudeExecutable(productsEnv({ env, writable }))
  if (kind === 'codex') return resolveCodexExecutable(productsEnv({ env, writable }))
  return undefined
}
