export * from "./types.ts"
