export * from './types.ts'
export { default, default as SandboxService } from './service.ts'
