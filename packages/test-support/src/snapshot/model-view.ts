/**
 * Process entry of bin/model-view.js: `model-view.js CONFIG SCRIPT WORKSPACE` boots the
 * composition with @conch/cli's own boot code, creates an agent working in WORKSPACE and prints
 * `{"tools": ToolSpec[], "systemPrompt": string}` as one JSON line on stdout. Diagnostics go to
 * stderr; the exit status is 1 when the composition does not start.
 */
import type { AgentServiceApi } from '@conch/agent'
import { boot, describeError, loadComposition } from '@conch/cli'
import type { ToolsServiceApi } from '@conch/tools'

const [config, script, workspace] = process.argv.slice(2)
if (config === undefined || script === undefined || workspace === undefined) {
  process.stderr.write('usage: model-view.js CONFIG SCRIPT WORKSPACE\n')
  process.exit(2)
}

let code = 0
try {
  const app = await boot(loadComposition({ config, script, env: process.env }), { stderr: process.stderr, logLevel: 'warn' })
  try {
    const tools = app.ctx.get('tools') as ToolsServiceApi
    const agents = app.ctx.get('agents') as AgentServiceApi
    const agent = await agents.create({ workspaceRoot: workspace })
    try {
      process.stdout.write(`${JSON.stringify({ tools: tools.specs(), systemPrompt: agents.systemPrompt(agent) })}\n`)
    } finally {
      await agents.dispose(agent)
    }
  } finally {
    await app.shutdown()
  }
} catch (error) {
  process.stderr.write(`model-view: ${describeError(error, 'warn')}\n`)
  code = 1
}
process.stdout.write('', () => process.exit(code))
