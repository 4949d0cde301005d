export * from './types.ts'
export { default, default as TasksService } from './service.ts'
