/**
 * Replies to terminal queries (`TerminalQuery`) as xterm formats them ("ctlseqs": DSR, DA,
 * DECRQM, XTVERSION, XTWINOPS 18, OSC 10–12). A reply goes to the program's input, never shown.
 */
import { unreachable } from '@conch/session'
import type { TerminalQuery } from './output.ts'

/** The state replies are made from. */
export interface QueryState {
  rows: number
  cols: number
  /** 1-based cursor position, where the output before the query left it. */
  cursor(): { row: number; col: number }
  /** DECSET/DECRST modes conch tracks: true set, false reset; absent = not recognised. */
  privateModes: ReadonlyMap<number, boolean>
  ansiModes: ReadonlyMap<number, boolean>
  /** `#rrggbb` colours: default foreground, background and cursor. */
  colors: { foreground: string; background: string; cursor: string }
  /** What XTVERSION reports, e.g. `conch(0.1.0)`. */
  version: string
}

/** Primary DA: a VT100 with Advanced Video Option, as xterm.js answers. */
export const PRIMARY_ATTRIBUTES = '\x1b[?1;2c'
/** Secondary DA: terminal type 0 (VT100), firmware 276, ROM 0 — xterm.js's answer. */
export const SECONDARY_ATTRIBUTES = '\x1b[>0;276;0c'

/** The reply to `query`, or undefined for one conch does not answer. */
export function replyTo(query: TerminalQuery, state: QueryState): string | undefined {
  switch (query.kind) {
    case 'status':
      return '\x1b[0n'
    case 'cursor': {
      const { row, col } = state.cursor()
      return query.private ? `\x1b[?${row};${col}R` : `\x1b[${row};${col}R`
    }
    case 'primary-attributes':
      return PRIMARY_ATTRIBUTES
    case 'secondary-attributes':
      return SECONDARY_ATTRIBUTES
    case 'mode': {
      const modes = query.private ? state.privateModes : state.ansiModes
      const value = modes.get(query.mode)
      // DECRPM: 0 not recognised, 1 set, 2 reset.
      const status = value === undefined ? 0 : value ? 1 : 2
      return `\x1b[${query.private ? '?' : ''}${query.mode};${status}$y`
    }
    case 'version':
      return `\x1bP>|${state.version}\x1b\\`
    case 'text-area-size':
      return `\x1b[8;${state.rows};${state.cols}t`
    case 'color': {
      const color = query.index === 10 ? state.colors.foreground : query.index === 11 ? state.colors.background : state.colors.cursor
      return `\x1b]${query.index};${xColor(color)}${query.terminator}`
    }
    default:
      return unreachable(query, 'terminal query')
  }
}

/** `#rrggbb` as an X11 colour spec with 16-bit channels (`rgb:rrrr/gggg/bbbb`), as xterm reports colours. */
export function xColor(hex: string): string {
  const channel = (offset: number) => hex.slice(offset, offset + 2).repeat(2)
  return `rgb:${channel(1)}/${channel(3)}/${channel(5)}`
}
