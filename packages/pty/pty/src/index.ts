export * from './types.ts'
export { delay, describeStatus, displayName, within } from './helpers.ts'
export { default, default as PtyService } from './service.ts'
export { boundScreenText, CURSOR_MARK, omittedRows, parseScreenHeader, screenHeader, type ScreenHeader } from './screen-text.ts'
