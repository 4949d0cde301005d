import { z } from 'zod'

const hexColor = () => z.string().regex(/^#[0-9a-fA-F]{6}$/, 'a colour is #rrggbb')
const positive = () => z.number().int().positive().max(Number.MAX_SAFE_INTEGER)

/**
 * Configuration of the node-pty backend. Every duration is in ms, every size in bytes or
 * lines as named. Defaults live here and nowhere else.
 */
export const Config = z
  .strictObject({
    /** Session type this backend registers on ctx.pty (`terminal_open {type}`). */
    backendType: z.string().min(1).default('shell'),
    /** The shell to run; bash is required for the controlled prompt (PROMPT_COMMAND). */
    shellPath: z.string().min(1).default('/bin/bash'),
    /** `+H`: history expansion off, so `!` in `echo "Done!"` or `A!B` is typed text, not a history event. */
    shellArgs: z.array(z.string()).default(['--noprofile', '--rcfile', '/dev/null', '+H', '-i']),
    rows: positive().default(40),
    cols: positive().default(160),
    /**
     * Colours reported to programs that ask (OSC 10, 11, 12: foreground, background, cursor), as
     * `#rrggbb`. Programs such as vim pick light or dark themes from the background.
     */
    colors: z
      .strictObject({
        foreground: hexColor().default('#e5e5e5'),
        background: hexColor().default('#000000'),
        cursor: hexColor().default('#e5e5e5'),
      })
      .prefault({}),
    /** Retained scrollback, in lines. */
    scrollbackLines: positive().default(10000),
    /** Retained scrollback, in UTF-8 bytes. */
    scrollbackMaxBytes: positive().default(4194304),
    /**
     * Lines of a send's output kept from its beginning beyond `scrollbackLines` (their bytes at most a
     * quarter of `scrollbackMaxBytes`), so a flood keeps where it began; 0 keeps only the newest lines.
     */
    scrollbackHeadLines: z.number().int().min(0).max(Number.MAX_SAFE_INTEGER).default(2000),
    /**
     * Longest line kept whole, in UTF-16 code units; a longer line is shown in pieces of this
     * length, as if broken by line feeds. Bounds the work per chunk on an open line.
     */
    maxLineLength: positive().default(16384),
    /**
     * A control string (OSC, DCS, SOS, PM, APC) left open while output pauses this long is
     * abandoned, so an unterminated one cannot hide what comes after it.
     */
    stringTimeoutMs: positive().default(1000),
    /** Bound of one read page and of one send's viewport, in UTF-8 bytes. */
    maxReadBytes: positive().default(262144),
    /** Interval of /proc probes while a send waits (after `exactProbeAfterMs`). */
    pollIntervalMs: positive().default(50),
    /** Delay before the first timer-driven /proc probe of a send; output-driven probes may come sooner. */
    exactProbeAfterMs: positive().default(150),
    /** Output silence after which a send settles `inferred_idle`. */
    idleSilenceMs: positive().default(3000),
    /** Extra silence allowed after a prompt marker was seen, for the foreground handoff race. */
    handoffGraceMs: positive().default(500),
    /**
     * Bound of the wait for the foreground program to consume a send's text before its Enter is
     * written as a separate key press (`submit`); usually the echo or the kernel shows it far sooner.
     */
    submitWaitMs: positive().default(50),
    /** Upper bound of one send (and of startup), settling `timeout`. */
    timeoutMs: positive().default(30000),
    /**
     * How long output that could be the start of a typed secret's value is held back for the
     * rest of it to arrive (see redact.ts); then it is shown as it was.
     */
    secretHoldMs: positive().default(50),
    /** Time processes get between SIGTERM/SIGHUP and SIGKILL when a session closes. */
    disposeGraceMs: positive().default(3000),
    /**
     * Environment variables passed to the shell even when the scrubbing policy of
     * `@conch/subprocess` (`scrubbedEnv`) would drop them; these values win over the parent's.
     */
    trustedEnv: z.record(z.string(), z.string()).default({}),
    /**
     * Names (or `*` patterns, `npm_config_*`) of parent variables passed to the shell although
     * the scrubbing policy would drop them.
     */
    allowEnv: z.array(z.string().min(1)).default([]),
    /**
     * Rows of scrollback the full screen model of a session opened with a `command` keeps
     * above its viewport (`screenState({scrollback: true})`).
     */
    programScrollbackRows: z.number().int().min(0).max(100000).default(2000),
  })
  .refine((c) => c.maxReadBytes <= c.scrollbackMaxBytes, {
    message: 'maxReadBytes must not exceed scrollbackMaxBytes',
    path: ['maxReadBytes'],
  })
  .refine((c) => c.handoffGraceMs >= c.pollIntervalMs, {
    message: 'handoffGraceMs must be at least pollIntervalMs (a shorter grace cannot fit one readiness poll)',
    path: ['handoffGraceMs'],
  })
  // A cordis.yml row without `config` passes undefined: every default applies.
  .prefault({})

export type Config = z.output<typeof Config>
