export * from './types.ts'
export { default, default as SessionService } from './service.ts'
export { parseSessionLog } from './replay.ts'
export { stateHome } from './workspace.ts'
