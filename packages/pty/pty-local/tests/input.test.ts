/**
 * What a send types, against real programs: named keys encoded for the terminal's modes, the
 * canonical line limit read from the terminal's termios, hidden input, and secrets that never
 * appear in what the terminal shows.
 */
import { readFileSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { PtyError } from '@conch/pty'
import { describe, expect, it } from 'vitest'
import { onPath, tempFolders } from '@conch/test-support/homes'
import type { LocalSession } from '../src/session.ts'
import { linesEqual, openSession, send } from './local-harness.ts'

const workdir = tempFolders('conch-input-')

function keys(session: LocalSession, entries: (string | { text: string })[]) {
  return session.startSend({ keys: entries, submit: false }).done
}

function refusal(run: () => unknown): PtyError {
  try {
    run()
  } catch (error) {
    return error as PtyError
  }
  throw new Error('the send was not refused')
}

describe('named keys', () => {
  it('Up then Enter at bash’s prompt runs the previous command again', async () => {
    const session = await openSession()
    const first = await send(session, 'echo REPEAT-$((40+2))')
    expect(linesEqual(first.viewport, 'REPEAT-42')).toBe(1)
    const again = await keys(session, ['Up', 'Enter'])
    expect(again.waitReason).toBe('stdin_read')
    expect(linesEqual(again.viewport, 'REPEAT-42')).toBe(1)
  })

  it('unknown key names are refused before anything is written, each named with its nearest valid name', async () => {
    const session = await openSession()
    const error = refusal(() => session.startSend({ keys: ['e', 'c', 'h', 'o', 'Spaec', 'x', 'ArrowDown', 'Enter'], submit: false }))
    expect(error).toBeInstanceOf(PtyError)
    expect(error.code).toBe('UNKNOWN_KEY')
    expect(error.message).toMatch(
      /^unknown keys "Spaec" \(entry 5 of keys; did you mean "Space"\?\), "ArrowDown" \(entry 7 of keys; did you mean "Down"\?\); nothing was written\. Keys are: Enter, Tab/,
    )
    // Nothing reached the shell: its line is empty, so this command runs alone.
    const next = await send(session, 'echo CLEAN-$((1+1))')
    expect(linesEqual(next.viewport, 'CLEAN-2')).toBe(1)
  })

  it('literal {text} entries and keys mix: C-a goes to the start of the line', async () => {
    const session = await openSession()
    const result = await keys(session, [{ text: 'MIXED-$((3*3))' }, 'C-a', { text: 'echo ' }, 'Enter'])
    expect(linesEqual(result.viewport, 'MIXED-9')).toBe(1)
  })

  it.skipIf(!onPath('less'))('PageDown in less shows the next page', async () => {
    const dir = workdir()
    writeFileSync(join(dir, 'long.txt'), Array.from({ length: 500 }, (_, i) => `line-${i + 1}`).join('\n'))
    const session = await openSession({ rows: 20 }, { cwd: dir })
    const page = await send(session, 'less long.txt')
    expect(page.viewport.split('\n')[1]).toBe('line-1')
    const next = await keys(session, ['PageDown'])
    expect(next.waitReason).toBe('stdin_read')
    expect(next.viewport.split('\n')[1]).toBe('line-20')
    await keys(session, ['q'])
  }, 30_000)

  it.skipIf(!onPath('vim'))('arrow keys move vim’s cursor in application cursor mode', async () => {
    const dir = workdir()
    writeFileSync(join(dir, 'x.txt'), 'alpha\nbravo\ncharlie\n')
    const session = await openSession({ idleSilenceMs: 2000 }, { cwd: dir })
    const opened = await send(session, 'vim -u NONE -i NONE -N x.txt')
    expect(opened.waitReason).toBe('stdin_read')
    // vim turned on application cursor keys (terminfo smkx: DECCKM and DECKPAM).
    expect(session.keyModes()).toEqual({ applicationCursor: true, applicationKeypad: true })
    // Down twice, Right twice, delete the character under the cursor, save.
    await keys(session, ['Down', 'Down', 'Right', 'Right', 'x'])
    await keys(session, [{ text: ':wq' }, 'Enter'])
    expect(readFileSync(join(dir, 'x.txt'), 'utf8')).toBe('alpha\nbravo\nchrlie\n')
    expect(session.keyModes()).toEqual({ applicationCursor: false, applicationKeypad: false })
  }, 30_000)
})

describe('the canonical line limit', () => {
  const reader = `python3 -c "import sys; print('LEN', len(sys.stdin.readline()))"`

  it('refuses a line over 4095 bytes to a canonical reader, writes nothing, and the reader still waits', async () => {
    const session = await openSession()
    const waiting = await send(session, reader)
    expect(waiting.waitReason).toBe('stdin_read')
    const refused = session.startSend({ text: 'x'.repeat(5000), submit: true }).done
    await expect(refused).rejects.toMatchObject({ code: 'LINE_TOO_LONG' })
    await expect(refused).rejects.toThrow(/the input is 5000 bytes, longer than the 4095 bytes .* canonical mode .*nothing was written\. Write the data to a file/)
    const fits = await send(session, 'y'.repeat(4000))
    expect(linesEqual(fits.viewport, 'LEN 4001')).toBe(1)
  })

  it('counts the text earlier sends left on the line without Enter', async () => {
    const session = await openSession()
    await send(session, reader)
    // 3000 characters typed without Enter stay in the reader's line; 3000 more would overflow it.
    await session.startSend({ text: 'z'.repeat(3000), submit: false, idleMs: 200 }).done
    const refused = session.startSend({ text: 'w'.repeat(3000), submit: true }).done
    await expect(refused).rejects.toMatchObject({ code: 'LINE_TOO_LONG' })
    await expect(refused).rejects.toThrow(/the input is .*\(with the text earlier sends typed on it without Enter\) 6000 bytes/)
    // What still fits completes the line: 3000 + 1000 characters and the newline.
    const fits = await send(session, 'w'.repeat(1000))
    expect(linesEqual(fits.viewport, 'LEN 4001')).toBe(1)
  })

  it('leaves a raw-mode reader alone: 5000 characters at bash’s prompt arrive whole', async () => {
    const session = await openSession()
    const result = await send(session, `echo ${'z'.repeat(5000)} | wc -c`)
    expect(result.waitReason).toBe('stdin_read')
    expect(linesEqual(result.viewport, '5001')).toBe(1)
  })
})

describe('hidden input and secrets', () => {
  const VALUE = 'Tr0ub4dor&3-horse-staple'

  it('read -s reports hidden input; a secret is typed, its echo shows as its name, and the value is nowhere', async () => {
    const session = await openSession()
    const asking = await send(session, 'read -s -p "Password: " pw; echo "len=${#pw}"')
    expect(asking.waitReason).toBe('stdin_read')
    expect(asking.inputState).toBe('hidden')
    const typed = await session.startSend({ secret: { name: 'DEMO_PASSWORD', value: VALUE }, submit: true }).done
    expect(linesEqual(typed.viewport, `len=${VALUE.length}`)).toBe(1)
    const printed = await send(session, `printf '%s\\n' "$pw"; printf 'again:%s:\\n' "$pw"`)
    expect(linesEqual(printed.viewport, '[secret DEMO_PASSWORD]')).toBe(1)
    expect(linesEqual(printed.viewport, 'again:[secret DEMO_PASSWORD]:')).toBe(1)
    // Typed at a prompt that echoes (the model's mistake): the echo is replaced too.
    const echoed = await session.startSend({ secret: { name: 'DEMO_PASSWORD', value: VALUE }, submit: true }).done
    const page = session.read({ offset: 0, count: 1000 })
    for (const text of [asking.viewport, typed.viewport, printed.viewport, echoed.viewport, page.text, session.screen()]) {
      expect(text).not.toContain(VALUE)
      expect(text).not.toContain(VALUE.slice(0, 12))
    }
    expect(page.text).toContain('[secret DEMO_PASSWORD]')
  })

  it('a program that prints the value a byte at a time, across many chunks, still shows only the name', async () => {
    const session = await openSession()
    await send(session, 'read -s pw')
    await session.startSend({ secret: { name: 'DRIP', value: VALUE }, submit: true }).done
    // One write per byte; the kernel and node-pty deliver them in separate chunks.
    const dripped = await send(session, `python3 -c "import os,sys,time; v=sys.argv[1]; [(os.write(1, v[i].encode()), time.sleep(0.002)) for i in range(len(v))]; os.write(1, b' drip-end\\n')" "$pw"`)
    expect(dripped.viewport).toMatch(/^\[secret DRIP\] drip-end$/m)
    expect(dripped.viewport).not.toContain(VALUE.slice(0, 4))
    expect(session.read({ offset: 0, count: 1000 }).text).not.toContain(VALUE.slice(0, 8))
  })

  it('a value printed in pieces apart in time, or split by bytes the text drops, still shows only the name', async () => {
    const session = await openSession()
    await send(session, 'read -s pw')
    await session.startSend({ secret: { name: 'PIECES', value: VALUE }, submit: true }).done
    const forms = [
      // Pieces further apart than secretHoldMs: the byte pass releases the first one.
      `printf '%s' "\${pw:0:4}"; sleep 0.2; printf '%s\\n' "\${pw:4}"`,
      // An SGR reset, a NUL and a carriage return that overwrites: bytes the rendered text drops.
      `printf '%s\\033[0m%s\\n' "\${pw:0:6}" "\${pw:6}"`,
      `printf '%s\\000%s\\n' "\${pw:0:6}" "\${pw:6}"`,
      `printf 'xxxxxx%s\\r%s\\n' "\${pw:6}" "\${pw:0:6}"`,
    ]
    for (const form of forms) {
      const shown = await send(session, `${form}; echo form-done`)
      expect(linesEqual(shown.viewport, 'form-done')).toBe(1)
      expect(shown.viewport, form).not.toContain(VALUE)
      expect(shown.viewport, form).toContain('[secret PIECES]')
    }
    expect(session.read({ offset: 0, count: 1000 }).text).not.toContain(VALUE)
    expect(session.screen()).not.toContain(VALUE)
  })

  it('a secret drawn on a full screen, inside escape sequences or in a window title is replaced before the screen model sees it', async () => {
    const session = await openSession()
    await send(session, 'read -s pw')
    await session.startSend({ secret: { name: 'SCREEN', value: VALUE }, submit: true }).done
    const drawn = await send(session, `printf '\\033]0;%s\\007\\033[?1049h\\033[5;10H%s\\033[1mX%s' "$pw" "$pw" "$pw"; read -n1 k`)
    expect(drawn.viewport).toContain('[secret SCREEN]')
    const screen = session.screen()
    expect(screen).toContain('[secret SCREEN]X[secret SCREEN]')
    for (const text of [drawn.viewport, screen, session.read({ offset: 0, count: 1000 }).text]) expect(text).not.toContain(VALUE.slice(0, 10))
    await keys(session, ['q'])
  })

  it('a value split by the cut of a line longer than maxLineLength, with or without an SGR inside it, shows only the name in results and pages', async () => {
    const session = await openSession()
    await send(session, 'read -s pw')
    await session.startSend({ secret: { name: 'LONG', value: VALUE }, submit: true }).done
    // 16379 digits, then the value: the parser cuts the line after 16384 characters, inside it.
    // The first half is released by the byte pass after secretHoldMs, or hidden from it by an SGR reset.
    const forms = [`printf '%016379d%s' 0 "\${pw:0:8}"; sleep 0.2; printf '%s\\n' "\${pw:8}"`, `printf '%016379d%s\\033[0m%s\\n' 0 "\${pw:0:8}" "\${pw:8}"`]
    for (const form of forms) {
      const shown = await send(session, `${form}; echo cut-done`)
      expect(linesEqual(shown.viewport, 'cut-done'), form).toBe(1)
      expect(shown.viewport, form).toContain('[secret LONG]')
      expect(shown.viewport, form).not.toContain(VALUE.slice(5))
      const page = session.read({ offset: 0, count: 100 })
      expect(page.text, form).not.toContain(VALUE.slice(5))
      // Pages that hold only one piece of the cut line: the first ends with the value's first 5 characters.
      for (let offset = 0; offset < 5; offset++) {
        for (const count of [1, 2]) {
          const text = session.read({ offset, count }).text
          expect(text, `${form} ${offset}/${count}`).not.toContain(VALUE.slice(5))
          expect(text, `${form} ${offset}/${count}`).not.toContain(VALUE.slice(0, 5))
        }
      }
    }
    // grep --color: the match is wrapped in SGR, so the byte pass sees the value in pieces.
    const dir = workdir()
    const json = await send(session, `echo "{\\"pad\\":\\"$(printf '%016362d' 0)\\",\\"token\\":\\"$pw\\"}" > ${dir}/j.json; grep --color=always 'dor' ${dir}/j.json; echo grep-done`)
    expect(linesEqual(json.viewport, 'grep-done')).toBe(1)
    expect(json.viewport).toContain('[secret LONG]')
    // The value starts 3 characters before the cut.
    const pages = [0, 1, 2, 3, 4].map((offset) => session.read({ offset, count: 1 }).text)
    for (const text of [json.viewport, session.read({ offset: 0, count: 100 }).text, ...pages]) {
      expect(text).not.toContain(VALUE.slice(3))
      expect(text).not.toMatch(/Tr0$/m)
    }
  })

  it.skipIf(!onPath('less'))('a value wrapped at the right margin of a screen shows only the name on the screen', async () => {
    const session = await openSession({ rows: 40, cols: 160 })
    await send(session, 'read -s pw')
    await session.startSend({ secret: { name: 'WRAP', value: VALUE }, submit: true }).done
    const dir = workdir()
    // The value starts at column 156 of 160: the screen wraps it after its fifth character.
    await send(session, `{ printf '%0155d%s\\n' 0 "$pw"; seq 30; } > ${dir}/s.txt; echo written`)
    const paged = await send(session, `less -R -p dor ${dir}/s.txt`)
    expect(paged.viewport).toMatch(/^\[screen: alternate 40x160/)
    const screen = session.screen()
    for (const text of [paged.viewport, screen]) {
      expect(text).toContain('[secret WRAP]')
      expect(text).not.toContain(VALUE.slice(5))
    }
    await keys(session, ['q'])
    // A value with a space where the row ends: the rendered rows lose that blank, the screen does not.
    const spaced = 'correct horse battery staple'
    await send(session, 'read -s pw2')
    await session.startSend({ secret: { name: 'SPACED', value: spaced }, submit: true }).done
    const draw = (between: string) =>
      `printf '\\033[?1049h\\033[H%0152d%s\\033[7m%s\\033[0m${between}%s' 0 "\${pw2:0:3}" "\${pw2:3:5}" "\${pw2:8}"; read -n1 k; printf '\\033[?1049l'`
    // Wrapped by the terminal at the margin (the next row is marked wrapped), and drawn row by
    // row with a cursor move (no mark); the SGR inside the value hides it from the byte pass.
    for (const between of ['', '\\033[2;1H']) {
      const drawn = await send(session, draw(between))
      expect(drawn.viewport).toMatch(/^\[screen: alternate 40x160/)
      for (const text of [drawn.viewport, session.screen()]) {
        expect(text, between).toContain('[secret SPACED]')
        expect(text, between).not.toContain('horse battery')
      }
      await keys(session, ['q'])
    }
  })

  it('live output shows the name for a value printed in halves further apart than secretHoldMs', async () => {
    const session = await openSession()
    await send(session, 'read -s pw')
    await session.startSend({ secret: { name: 'LIVE', value: VALUE }, submit: true }).done
    const operation = session.startSend({ text: `printf 'c:%s' "\${pw:0:8}"; sleep 0.3; printf '%s\\n' "\${pw:8}"; echo live-done`, submit: true })
    const pieces: string[] = []
    operation.onOutput(() => {
      const piece = operation.readOutput()
      if (piece !== '') pieces.push(piece)
    })
    const result = await operation.done
    pieces.push(operation.readOutput())
    expect(linesEqual(result.viewport, 'live-done')).toBe(1)
    const streamed = pieces.join('')
    expect(streamed).toMatch(/^c:\[secret LIVE\]$/m)
    expect(streamed).toMatch(/^live-done$/m)
    for (const piece of pieces) {
      expect(piece).not.toContain(VALUE.slice(0, 8))
      expect(piece).not.toContain(VALUE.slice(8))
    }
  })

  it('output that only begins like a secret is shown as it was, once nothing completes it', async () => {
    const session = await openSession()
    await send(session, 'read -s pw')
    await session.startSend({ secret: { name: 'DEMO', value: VALUE }, submit: true }).done
    const partial = await send(session, `printf 'Tr0ub4'`)
    expect(partial.viewport + session.read({ offset: 0, count: 5 }).text).toContain('Tr0ub4')
  })

  it.skipIf(!onPath('python3'))('Python getpass reports hidden input', async () => {
    const session = await openSession()
    const asking = await send(session, `python3 -c "import getpass; p = getpass.getpass('Secret: '); print('got', len(p))"`)
    expect(asking.inputState).toBe('hidden')
    const typed = await session.startSend({ secret: { name: 'DEMO', value: VALUE }, submit: true }).done
    expect(linesEqual(typed.viewport, `got ${VALUE.length}`)).toBe(1)
  })

  it.skipIf(!onPath('ssh-keygen'))('ssh-keygen’s passphrase prompts are hidden, and a secret answers both', async () => {
    const dir = workdir()
    const session = await openSession({}, { cwd: dir })
    const first = await send(session, 'ssh-keygen -q -t ed25519 -C test -f ./key')
    expect(first.inputState).toBe('hidden')
    expect(first.viewport).toMatch(/passphrase/i)
    const again = await session.startSend({ secret: { name: 'PASSPHRASE', value: VALUE }, submit: true }).done
    expect(again.inputState).toBe('hidden')
    const done = await session.startSend({ secret: { name: 'PASSPHRASE', value: VALUE }, submit: true }).done
    expect(done.waitReason).toBe('stdin_read')
    expect(done.inputState).toBe('prompt')
    expect(readFileSync(join(dir, 'key.pub'), 'utf8')).toMatch(/^ssh-ed25519 /)
    // The key really has that passphrase: ssh-keygen -y needs it to print the public key.
    const check = await send(session, `ssh-keygen -y -P "$(printf '%s' '${VALUE.replace(/'/g, "'\\''")}')" -f ./key >/dev/null && echo PASSPHRASE-OK`)
    expect(linesEqual(check.viewport, 'PASSPHRASE-OK')).toBe(1)
  })

  it('a plain canonical reader with echo on, and bash’s own prompt, are not hidden', async () => {
    const session = await openSession()
    const cat = await send(session, 'cat')
    expect(cat.waitReason).toBe('stdin_read')
    expect(cat.inputState).not.toBe('hidden')
    await session.signal('SIGINT')
    const prompt = await send(session, 'true')
    expect(prompt.inputState).toBe('prompt')
  })

  it('a secret value that is too short or holds a line break is refused before anything is written', async () => {
    const session = await openSession()
    expect(refusal(() => session.startSend({ secret: { name: 'PIN', value: '1234' }, submit: true })).message).toMatch(/secret PIN is shorter than 8 bytes/)
    const broken = refusal(() => session.startSend({ secret: { name: 'TWO', value: 'first-line\nsecond-line' }, submit: true }))
    expect(broken.message).toMatch(/secret TWO holds a control character/)
    expect(broken.message).not.toContain('first-line')
  })
})
