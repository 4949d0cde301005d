export * from './types.ts'
export { startFakeModel, splitWords, type FakeModelServer } from './server.ts'
export { DEFAULT_SENTINEL_PATTERN, chooseSentinel, defaultFrame, pairFrame } from './sentinel.ts'
export { chatChunk } from './encode.ts'
