export * from './types.ts'
export { default, default as SubagentService } from './service.ts'
export {
  AbsoluteDirectory,
  outOfProcessConfig,
  childCwd,
  childEnv,
  spawnChild,
  raceStart,
  disposeProcess,
  describeExit,
  StreamTail,
  type OutOfProcessConfig,
  type SpawnChildOptions,
  type RaceStartOptions,
  type DisposeProcessOptions,
} from './out-of-process.ts'
