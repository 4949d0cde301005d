export * from './types.ts'
export { default, default as PtyService } from './service.ts'
