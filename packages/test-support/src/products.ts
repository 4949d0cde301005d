/**
 * The pinned product binaries from .products/ (scripts/install-products.sh), the conch bin, and
 * the fake model answering each prompt by rule, so the real Claude Code and Codex TUIs run
 * keyless against it (the pool and pool-provider tests).
 *
 * Prompt rules (the fake model reads the last user text and the whole conversation):
 * - `Qn: …` → `answer n: …`
 * - `REMEMBER name=value` → `noted`; `RECALL name` → the remembered value found anywhere
 *   in the conversation the CLI sent, else `unknown`
 * - `STALL` → for a pooled CLI, the stream stops after the opening sentinel until released;
 *   for the fresh-spawn path (no sentinel instruction), `fresh answer`
 * - `SLOW` → one word every 300 ms
 */
import { existsSync, mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join, resolve } from 'node:path'
import { afterAll, onTestFinished } from 'vitest'
import { pairFrame, startFakeModel, type FakeAnswer, type FakeModelServer, type FakeRequest } from './fake-model/index.ts'

const root = resolve(import.meta.dirname, '../../..')
const products = process.env.CONCH_PRODUCTS_DIR ?? join(root, '.products')
export const CLAUDE_BIN = join(products, 'node_modules/@anthropic-ai/claude-agent-sdk-linux-x64/claude')
/** The conch bin; `conch pool-worker` is the managed worker. */
export const CONCH_BIN = join(root, 'packages/cli/bin/conch.js')
export const CODEX_BIN = join(products, 'node_modules/@openai/codex-linux-x64/vendor/x86_64-unknown-linux-musl/bin/codex')
/**
 * A small ACP agent (node, the SDK's agent() API) whose behaviour the prompt's words choose,
 * and a start mode in argv[2]: the list heads the file.
 */
export const ACP_AGENT = resolve(import.meta.dirname, '../fixtures/acp-agent.mjs')

/** A missing product is a failure, not a skip: scripts/test.sh installs them. */
export function requireProduct(path: string): string {
  if (!existsSync(path)) throw new Error(`${path} is missing; run scripts/install-products.sh`)
  return path
}

export function ruleAnswer(request: FakeRequest): FakeAnswer {
  const text = request.userText
  if (/Generate a concise, single-line task title/i.test(text)) return { text: 'title', sentinel: 'omit' }
  const history = JSON.stringify(request.body ?? '')
  // Only a pooled CLI (its system prompt carries the sentinel instruction) stalls; the fresh-spawn path answers.
  if (text.includes('STALL') && !request.system.includes('<<<CONCH-')) return { text: 'fresh answer' }
  if (text.includes('STALL')) return { text: 'stalled answer here', stallAfterChunks: 1 }
  if (text.includes('SLOW')) return { text: 'a slow answer with many words to say', chunkDelayMs: 300 }
  const question = /Q(\d+): ([^\n"\\]*)/.exec(lastLine(text))
  if (question) return { text: `answer ${question[1]}: ${question[2]!.trim()}` }
  const remember = /REMEMBER (\w+)=(\w+)/.exec(text)
  if (remember) return { text: 'noted' }
  const recall = /RECALL (\w+)/.exec(text)
  if (recall) {
    const found = new RegExp(`REMEMBER ${recall[1]}=(\\w+)`).exec(history)
    return { text: found ? `value ${found[1]}` : 'unknown' }
  }
  return { text: 'ok' }
}

function lastLine(text: string): string {
  const lines = text.split('\n').filter((line) => /Q\d+:/.test(line))
  return lines[lines.length - 1] ?? ''
}

export async function startModel(): Promise<FakeModelServer> {
  return startFakeModel({ respond: ruleAnswer, frame: pairFrame })
}

/**
 * A fresh folder under the system's temporary folder (`prefix` then six characters), removed
 * with everything in it after the test that made it, or after the file when made at its top
 * level. Made in a hook, it is the caller's to remove (vitest takes no afterAll there).
 */
export function tempDir(prefix: string): string {
  const dir = mkdtempSync(join(tmpdir(), prefix))
  const remove = () => rmSync(dir, { recursive: true, force: true })
  try {
    onTestFinished(remove)
  } catch {
    afterAll(remove)
  }
  return dir
}

/** The Claude kind against the fake model. */
export function claudeKind(model: FakeModelServer) {
  return {
    command: requireProduct(CLAUDE_BIN),
  }
}

export function claudeEnv(model: FakeModelServer): Record<string, string> {
  return { PATH: process.env.PATH ?? '/usr/bin:/bin', ANTHROPIC_BASE_URL: model.url, ANTHROPIC_API_KEY: 'sk-test-0123456789abcdefghijklmnop' }
}

/** The Codex kind against the fake model: its config.toml names the fake provider. */
export function codexKind(model: FakeModelServer) {
  return {
    command: requireProduct(CODEX_BIN),
    files: {
      '.codex/config.toml': [
        'model = {modelJson}',
        'model_provider = "fake"',
        'developer_instructions = {instructionJson}',
        'check_for_update_on_startup = false',
        '[model_providers.fake]',
        'name = "fake"',
        `base_url = "${model.openaiBaseUrl}"`,
        'wire_api = "responses"',
        'env_key = "FAKE_API_KEY"',
        'request_max_retries = 0',
        'stream_max_retries = 0',
        '[analytics]',
        'enabled = false',
        '[feedback]',
        'enabled = false',
        '[features]',
        ...['plugins', 'apps', 'remote_plugin', 'plugin_sharing', 'tool_suggest', 'skill_mcp_dependency_install', 'shell_snapshot', 'image_generation', 'computer_use', 'browser_use', 'in_app_browser', 'goals'].map((name) => `${name} = false`),
        '[projects.{cwdJson}]',
        'trust_level = "trusted"',
        '',
      ].join('\n'),
    },
    passEnv: ['FAKE_API_KEY'],
  }
}

export function codexEnv(): Record<string, string> {
  return { PATH: process.env.PATH ?? '/usr/bin:/bin', FAKE_API_KEY: 'dummy' }
}

