/**
 * The snapshot harness of the examples: runs `conch run` and `conch acp` as processes on
 * scenario folders, normalises what varies, and compares with (or rewrites) the expectations.
 */
export { AcpInput, AcpStep, readAcpInput, runAcpScenario, updateText, type AcpRun } from './acp.ts'
export { modelView, type ModelView } from './composition.ts'
export { jsonLines, matchExpectation, UPDATING } from './expectation.ts'
export { HeadlessInput, readHeadlessInput, runHeadless, type HeadlessRun } from './headless.ts'
export { collapseLiveOutput, Normaliser, renumberIds, type NormaliseOptions, type RunKind } from './normalise.ts'
export { alive, CONCH_BIN, processesIn, REPO_ROOT, startConch, type ConchProcess } from './process.ts'

import { readdirSync, statSync } from 'node:fs'
import { join } from 'node:path'

/** The scenario folders under `dir` (each holds an input.json), sorted by name. */
export function scenarios(dir: string): string[] {
  return readdirSync(dir)
    .filter((name) => statSync(join(dir, name)).isDirectory())
    .sort()
}
