export * from './types.ts'
export { default, default as SandboxPolicyService, SANDBOX_MODE_EVENT, describePolicy } from './service.ts'
