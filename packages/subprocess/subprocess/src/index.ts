export * from './types.ts'
export { default, default as SubprocessService, SUBPROCESS_TAG_VARIABLE } from './service.ts'
export { parseProcStat } from './proc-stat.ts'
export { nodeProcFs } from './proc-fs.ts'
export { isExecutableFile, isWithin, pathOutside, resolveExecutable, skippedExecutables, SYSTEM_FOLDERS, systemFolders } from './executable.ts'
export { linuxProcessTable } from './table-linux.ts'
export { macosProcessTable, parsePsLine, environFromPsLine, type PsRunner } from './table-macos.ts'
export { defaultProcessTable } from './table.ts'
export { treeOf } from './tree.ts'
export { signalIfSame, isEnded, type SignalOutcome, type ProcessIdentity } from './signal.ts'
export { terminateTree, treeMembers } from './terminate.ts'
export { scrubbedEnv, scrubEnv, dropReason, withholdVariables, createSessionTag, type ScrubOptions, type DroppedVariable } from './env.ts'
export { readableFrom, writableTo, HEAD_BYTES, type ReadableFromOptions } from './stdio.ts'
export { tagSupervisor, createTagSupervisor, SUPERVISOR_VARIABLE, type TagSupervisor, type TagSupervisorOptions } from './supervisor.ts'
export { closeDescriptorsCommand, descriptorShell, withDescriptorsClosed } from './descriptors.ts'
export {
  appendFile,
  beneath,
  BeneathError,
  createFile,
  ensurePrivateFolder,
  interceptedFs,
  newestFile,
  nodeBeneathFs,
  openFile,
  openFolder,
  readFile,
  readOpen,
  removeTree,
  type BeneathErrorCode,
  type BeneathFs,
  type BeneathOptions,
  type FileMode,
  type FolderIdentity,
  type OpenFile,
  type OpenFolder,
} from './beneath.ts'
