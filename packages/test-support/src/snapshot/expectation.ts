/**
 * Expectation files: `pnpm test:snapshot` compares, `pnpm test:snapshot:update`
 * (`CONCH_UPDATE_SNAPSHOTS=1`) rewrites them on purpose.
 */
import { existsSync, readFileSync, writeFileSync } from 'node:fs'
import { relative } from 'node:path'
import { expect } from 'vitest'

/** Whether this run rewrites expectations (`CONCH_UPDATE_SNAPSHOTS=1`). */
export const UPDATING = process.env['CONCH_UPDATE_SNAPSHOTS'] === '1'

/**
 * Compares `actual` with the file's text (a failing test shows the diff), or writes the file
 * when updating. A missing file fails and says how to create it.
 */
export function matchExpectation(file: string, actual: string): void {
  if (UPDATING) {
    if (!existsSync(file) || readFileSync(file, 'utf8') !== actual) writeFileSync(file, actual)
    return
  }
  if (!existsSync(file)) {
    throw new Error(`${relative(process.cwd(), file)} does not exist; create it with pnpm test:snapshot:update and review it`)
  }
  expect(actual, `${relative(process.cwd(), file)} (pnpm test:snapshot:update rewrites it when the change is intended)`).toBe(readFileSync(file, 'utf8'))
}

/** JSON Lines: one compact JSON value per line, newline-terminated. */
export function jsonLines(values: readonly unknown[]): string {
  return values.map((value) => `${JSON.stringify(value)}\n`).join('')
}
