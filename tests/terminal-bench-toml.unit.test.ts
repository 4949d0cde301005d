/** The few task.toml numbers the Terminal-Bench runner reads (examples/terminal-bench/run.ts). */
import { describe, expect, it } from 'vitest'
import { tomlNumber } from '../examples/terminal-bench/run.ts'

const TOML = `version = "1.0"

[metadata]
difficulty = "easy"   # timeout_sec = 1 in a comment is no key
tags = ["c"]

[verifier]
timeout_sec = 60.0

[agent]
timeout_sec = 120  # seconds
[environment]
build_timeout_sec=300.5
`

describe('reading task.toml', () => {
  it('reads a number of the named section only', () => {
    expect(tomlNumber(TOML, 'verifier', 'timeout_sec')).toBe(60)
    expect(tomlNumber(TOML, 'agent', 'timeout_sec')).toBe(120)
    expect(tomlNumber(TOML, 'environment', 'build_timeout_sec')).toBe(300.5)
  })

  it('answers undefined for a key the section lacks', () => {
    expect(tomlNumber(TOML, 'metadata', 'timeout_sec')).toBeUndefined()
    expect(tomlNumber(TOML, 'solution', 'timeout_sec')).toBeUndefined()
  })
})
