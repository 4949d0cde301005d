export * from './types.ts'
export { codeHeldBy, default, default as SandboxService, HOLDING_ROOTS, SHARED_ROOTS, SYSTEM_ROOTS, workspaceRootProblem } from './service.ts'
export { protectedPathProblem, type ProtectedPath, type ProtectedPathProblem } from './protected.ts'
export { GIT_NEUTRALISED, gitGuardScript } from './git-guard.ts'
