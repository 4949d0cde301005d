export * from './types.ts'
export { default, default as ToolsService, errorResult, toolResultText, MIN_RESULT_BYTES } from './service.ts'
export { boundUtf8, boundWithNotice, budgetOutput, omissionMarker, summariseBinary, tailShareOf, type BudgetOptions, type Budgeted, type OmittedRange, truncationNotice, utf8Bytes, type BoundOptions, type Bounded } from './bound.ts'
