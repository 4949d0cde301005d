export * from './types.ts'
export { default, default as PtcService } from './service.ts'
export { checkBindings, nameProblem, PROTECTED_GLOBALS } from './bindings.ts'
export { isLosslessJson } from './json.ts'
