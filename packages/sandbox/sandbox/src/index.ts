export * from './types.ts'
export { codeHeldBy, default, default as SandboxService, SHARED_ROOTS, sharedRootProblem } from './service.ts'
export { protectedPathProblem, type ProtectedPath, type ProtectedPathProblem } from './protected.ts'
