/**
 * What a composition offers the model: the tool specs (name, description, JSON Schema of the
 * parameters, ACP kind) and the system prompt of an agent working in `workspace`. Read by a
 * child process (bin/model-view.js) through @conch/cli's own boot code, since the plugin loader
 * imports the packages' TypeScript sources natively.
 */
import { spawn } from 'node:child_process'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'
import type { ToolSpec } from '@conch/tools'
import { REPO_ROOT } from './process.ts'

const BIN = join(dirname(fileURLToPath(import.meta.url)), '..', '..', 'bin', 'model-view.js')

export interface ModelView {
  tools: ToolSpec[]
  systemPrompt: string
}

/** @throws Error with the child's stderr when the composition does not start. */
export function modelView(options: { config: string; script: string; workspace: string }): Promise<ModelView> {
  return new Promise((resolvePromise, reject) => {
    const child = spawn(process.execPath, [BIN, options.config, options.script, options.workspace], { cwd: REPO_ROOT })
    let stdout = ''
    let stderr = ''
    child.stdout.setEncoding('utf8').on('data', (chunk: string) => (stdout += chunk))
    child.stderr.setEncoding('utf8').on('data', (chunk: string) => (stderr += chunk))
    child.on('error', reject)
    child.on('close', (code) => {
      if (code !== 0) {
        reject(new Error(`model-view exited ${code}:\n${stderr}`))
        return
      }
      resolvePromise(JSON.parse(stdout) as ModelView)
    })
  })
}
