export * from './types.ts'
export { OutputBuffer, tailUtf8 } from './output.ts'
export { default, default as TasksService } from './service.ts'
