export * from './types.ts'
export * from './events.ts'
export { default, default as AgentService, DEFAULT_INSTRUCTIONS, INSTRUCTIONS_SECTION } from './service.ts'
export { buildMessages, MISSING_RESULT } from './history.ts'
