/**
 * `@conch/cli`: the `conch` command and the boot code it is made of, for hosts that compose
 * conch themselves (an ACP server, a test, an example).
 */
export { main, type AnswerInitializeEarly, type MainIo, type RunAcp } from './cli.ts'
export { boot, describeError, type App, type BootOptions, type LogLevel } from './boot.ts'
export { applyPatches, findRow, flattenRows, readComposition, type Composition, type EntryRow, type Patch } from './compose.ts'
export { expand, interpolateEnv } from './env.ts'
export { BootError, CliError, type CliErrorCode, type EntryFailure } from './errors.ts'
export { checkApiKey, useScript, REPLAY_PROVIDER } from './model.ts'
export { compositionPaths, installationPaths, protectedPathsOf } from './protect.ts'
export { enabledRows, preparePlugins, resolvePluginUrl } from './resolve.ts'
export { bootFor, loadComposition, runCommand, type CommandIo } from './run.ts'
export { createTranscript, resultStatus, type OutputFormat, type Transcript } from './transcript.ts'
export { parseAcpArgs, parseRunArgs, type AcpArgs, type RunArgs } from './args.ts'
