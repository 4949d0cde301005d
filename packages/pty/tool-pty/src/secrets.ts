/**
 * Deployment secrets for `terminal_send {secret: NAME}`: names from the tool config, values read
 * at the moment of the send from the environment or a file — never at load and never kept, so a
 * rotated value takes effect at the next send. Only names ever reach a result.
 */
import { readFileSync } from 'node:fs'
import { PtyError, SecretRedactor, type SecretValue } from '@conch/pty'
import type { SessionRedactor } from '@conch/session'
import type { SecretSource } from './config.ts'

/** `A, B` or `none`, for errors, the tool description and terminal_list. */
export function secretNames(secrets: Record<string, SecretSource>): string {
  const names = Object.keys(secrets)
  return names.length === 0 ? 'none' : names.join(', ')
}

/**
 * The value of secret `name`, read now.
 * @throws PtyError `UNKNOWN_SECRET` listing the configured names; `SECRET_UNAVAILABLE` naming the
 *   variable or file (never a value) when it is unset, empty or unreadable.
 */
export function readSecret(secrets: Record<string, SecretSource>, name: string, env: NodeJS.ProcessEnv = process.env): SecretValue {
  const source = Object.hasOwn(secrets, name) ? secrets[name] : undefined
  if (source === undefined) throw new PtyError('UNKNOWN_SECRET', { name, configured: secretNames(secrets) })
  if ('env' in source) {
    const value = env[source.env]
    if (value === undefined || value === '') {
      throw new PtyError('SECRET_UNAVAILABLE', { reason: `secret ${name} comes from the environment variable ${source.env}, which is not set in conch's environment; nothing was written` })
    }
    return { name, value }
  }
  let value: string
  try {
    value = readFileSync(source.file, 'utf8')
  } catch (error) {
    throw new PtyError('SECRET_UNAVAILABLE', { reason: `secret ${name} comes from ${source.file}, which cannot be read (${(error as NodeJS.ErrnoException).code ?? 'error'}); nothing was written` })
  }
  value = value.replace(/\r?\n$/, '')
  if (value === '') throw new PtyError('SECRET_UNAVAILABLE', { reason: `secret ${name} comes from ${source.file}, which is empty; nothing was written` })
  return { name, value }
}

/**
 * Every configured secret whose value can be read now, for a terminal to redact from its first
 * output (`SpawnOptions.redact`): a terminal that reads a secret's file or otherwise prints the
 * value shows its name, also before any send typed it. Unreadable ones are left out; a send that
 * types one says why.
 */
export function readableSecrets(secrets: Record<string, SecretSource>, env: NodeJS.ProcessEnv = process.env): SecretValue[] {
  const out: SecretValue[] = []
  for (const name of Object.keys(secrets)) {
    try {
      out.push(readSecret(secrets, name, env))
    } catch {
      // Unset, unreadable or empty now.
    }
  }
  return out
}

/**
 * The redactor of every text a session records or shows (`ctx.sessions.redact`): each configured
 * secret readable now becomes `[secret NAME]` — the terminals' own text passes, applied to
 * run_code's output, a sub-agent's result and any other tool's text. Values are read again after
 * each synchronous stretch of use (an event's strings share one read), so a rotated value
 * counts at once.
 */
export function secretsRedactor(secrets: Record<string, SecretSource>, env: NodeJS.ProcessEnv = process.env): SessionRedactor {
  let current: { key: string; redactor: SecretRedactor } = { key: '', redactor: new SecretRedactor() }
  let fresh = false
  const redactor = (): SecretRedactor => {
    if (fresh) return current.redactor
    fresh = true
    queueMicrotask(() => (fresh = false))
    const values = readableSecrets(secrets, env)
    const key = JSON.stringify(values.map((secret) => [secret.name, secret.value]))
    if (key !== current.key) {
      const next = new SecretRedactor()
      for (const secret of values) {
        try {
          next.add(secret.name, secret.value)
        } catch {
          // Shorter than MIN_SECRET_BYTES: it would match ordinary text (terminals skip it too).
        }
      }
      current = { key, redactor: next }
    }
    return current.redactor
  }
  return { redact: (text) => redactor().redactText(text), splitLive: (text) => redactor().splitLive(text) }
}
