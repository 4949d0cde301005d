export * from './types.ts'
export { default, default as LlmService } from './service.ts'
export { collectResponse } from './collect.ts'
