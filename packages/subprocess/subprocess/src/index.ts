export * from './types.ts'
export { parseProcStat } from './proc-stat.ts'
