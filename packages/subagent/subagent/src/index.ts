export * from './types.ts'
export { default, default as SubagentService } from './service.ts'
export { modeFence, type ModeFence } from './mode-fence.ts'
export { hidePrivateRoot } from './private-root.ts'
export { isExecutableFile } from '@conch/subprocess'
export { findProductsDir, platformPackage, productsEnv, resolveClaudeExecutable, resolveCodexExecutable, type ProductsEnv } from './products.ts'
export {
  AbsoluteDirectory,
  PROVIDER_NAME,
  providerName,
  cacheFolder,
  executableFile,
  outOfProcessConfig,
  acpChildConfig,
  childCwd,
  childEnv,
  parentWritable,
  spawnChild,
  raceStart,
  disposeProcess,
  StreamTail,
  EXIT_WINDOW_MS,
  type OutOfProcessConfig,
  type AcpChildConfig,
  type SpawnChildOptions,
  type RaceStartOptions,
  type DisposeProcessOptions,
} from './out-of-process.ts'
