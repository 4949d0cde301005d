#!/usr/bin/env bash
# Sets up the clone (scripts/setup.sh) and runs the main job: a headless agent driving real,
# sandboxed terminals from the root cordis.yml. With DEEPSEEK_API_KEY or OPENAI_API_KEY set, a
# live model does the task; without one, the scripted session examples/headless-agent/demo.jsonl
# drives the same terminals.
set -euo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/setup.sh"
if [ -n "${DEEPSEEK_API_KEY:-}${OPENAI_API_KEY:-}" ]; then
  exec pnpm --silent conch run --output text "$(cat examples/headless-agent/demo-task.txt)"
else
  # The child conch the demo delegates to answers from its own script too.
  CONCH_SUBAGENT_SCRIPT=examples/headless-agent/demo-child.jsonl \
    exec pnpm --silent conch run --script examples/headless-agent/demo.jsonl --output text "demo"
fi
