/**
 * The memory shell's command-line grammar: a small subset of bash's (bash(1), QUOTING and
 * Lists). Words with single quotes, double quotes and backslash escapes; the list operators
 * `;`, `&&`, `||` and newline; `#` comments. A pipe `|` or a background `&` is recognised only
 * to be refused. Expansion (`$NAME`, `${NAME}`, `${NAME:-word}`, `$?`, a leading `~`) happens at
 * run time, so `export A=1; echo $A` sees the new value.
 */

/** A piece of a word: quoted text is taken literally, other text is expanded when run. */
export interface WordPart {
  text: string
  /** Whether `$` expansion applies (unquoted and double-quoted text). */
  expand: boolean
  /** Whether a leading `~` may expand (unquoted text at the start of a word). */
  tilde: boolean
}

export type Word = WordPart[]

/** One simple command and how it joins the one before it. */
export interface ListItem {
  connector: ';' | '&&' | '||'
  words: Word[]
  /** Set when the command used syntax the memory shell refuses (`|`, `&`). */
  unsupported?: string
}

export type LexResult = { complete: true; list: ListItem[] } | { complete: false }

/**
 * Splits a command line into a list. `complete: false` means the line ends inside a quote or
 * after a backslash: bash would print its secondary prompt (PS2, `> `) and read more.
 */
export function lex(source: string): LexResult {
  const list: ListItem[] = []
  let item: ListItem = { connector: ';', words: [] }
  let word: Word | undefined
  let index = 0

  const part = (text: string, expand: boolean, tilde = false) => {
    word ??= []
    const last = word.at(-1)
    if (last && last.expand === expand && !tilde) last.text += text
    else word.push({ text, expand, tilde })
  }
  const endWord = () => {
    if (word) item.words.push(word)
    word = undefined
  }
  const endItem = (connector: ListItem['connector']) => {
    endWord()
    if (item.words.length > 0 || item.unsupported) list.push(item)
    item = { connector, words: [] }
  }

  while (index < source.length) {
    const char = source[index]!
    if (char === ' ' || char === '\t') {
      endWord()
      index++
    } else if (char === '\n' || char === ';') {
      endItem(';')
      index++
    } else if (char === '&' && source[index + 1] === '&') {
      endItem('&&')
      index += 2
    } else if (char === '|' && source[index + 1] === '|') {
      endItem('||')
      index += 2
    } else if (char === '|' || char === '&') {
      item.unsupported = char === '|' ? 'pipes' : 'background jobs (&)'
      endWord()
      index++
    } else if (char === '#' && word === undefined) {
      while (index < source.length && source[index] !== '\n') index++
    } else if (char === "'") {
      const close = source.indexOf("'", index + 1)
      if (close < 0) return { complete: false }
      part(source.slice(index + 1, close), false)
      index = close + 1
    } else if (char === '"') {
      let text = ''
      index++
      for (;;) {
        if (index >= source.length) return { complete: false }
        const inner = source[index]!
        if (inner === '"') break
        if (inner === '\\') {
          const next = source[index + 1]
          if (next === undefined) return { complete: false }
          // Inside double quotes a backslash escapes only $ ` " \ and newline (bash(1), QUOTING).
          if (next === '\n') index += 2
          else if ('$`"\\'.includes(next)) {
            // Keep an escaped `$` out of expansion by emitting it as literal text.
            if (text) part(text, true)
            text = ''
            part(next, false)
            index += 2
          } else {
            text += inner
            index++
          }
          continue
        }
        text += inner
        index++
      }
      // An empty "" still makes a word.
      part(text, true)
      index++
    } else if (char === '\\') {
      const next = source[index + 1]
      if (next === undefined) return { complete: false }
      if (next !== '\n') part(next, false)
      index += 2
    } else {
      part(char, true, word === undefined && char === '~')
      index++
    }
  }
  endItem(';')
  return { complete: true, list }
}

/**
 * Expands one word: `$?`, `$NAME`, `${NAME}`, `${NAME:-default}` in unquoted and double-quoted
 * parts, and a leading unquoted `~` (alone or before `/`) to HOME. Unset names expand to ''.
 * No field splitting or globbing: a word stays one argument.
 */
export function expandWord(word: Word, lookup: (name: string) => string | undefined): string {
  let out = ''
  for (const [position, piece] of word.entries()) {
    let text = piece.text
    if (piece.tilde && position === 0 && text.startsWith('~') && (text.length === 1 || text[1] === '/')) {
      text = (lookup('HOME') ?? '~') + text.slice(1)
    }
    out += piece.expand ? expandText(text, lookup) : text
  }
  return out
}

function expandText(text: string, lookup: (name: string) => string | undefined): string {
  return text.replace(/\$(?:\?|([A-Za-z_][A-Za-z0-9_]*)|\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\})/g, (match, bare: string | undefined, braced: string | undefined, fallback: string | undefined) => {
    if (match === '$?') return lookup('?') ?? '0'
    const value = lookup((bare ?? braced)!)
    if (fallback !== undefined && (value === undefined || value === '')) return fallback
    return value ?? ''
  })
}
