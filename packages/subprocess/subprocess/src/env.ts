/**
 * The environment a confined child starts with: every package that starts a program for the
 * model derives it with `scrubbedEnv`, so one policy decides what crosses the trust boundary. The
 * rules (by name or by value) are heuristics, tabulated in the README: they cannot see a secret
 * under an innocent name with an innocent-looking value.
 */
import { randomBytes } from 'node:crypto'
import type { SessionTag } from './types.ts'

/** Prefix of conch's own variables (session tags and the like), never inherited by a child. */
const INTERNAL_PREFIX = 'CONCH_'

/** Substrings of an upper-cased name that make it look like a secret. */
const SECRET_SUBSTRINGS = ['KEY', 'TOKEN', 'SECRET', 'PASSWORD', 'PASSWD', 'PASSPHRASE', 'WEBHOOK', 'PRIVATE', 'SESSION', 'COOKIE']

/** Whole words (of an upper-cased name split at `_`, `-`, `.`) that make it look like a secret. */
const SECRET_WORDS = ['PWD', 'PAT', 'DSN', 'AUTH', 'OAUTH', 'HMAC', 'JWT', 'SALT', 'SIGNING']

/** Last words that make a name look like a secret (`DB_PASS`, `ROOT_PW`); elsewhere they are tool prefixes. */
const SECRET_LAST_WORDS = ['PASS', 'PW']

/** Last words ending in `PASS` that are ordinary words (`PROXY_BYPASS`), not a password (`SSHPASS`, `PGPASS`). */
const PASS_WORDS = new Set(['BYPASS', 'COMPASS', 'SURPASS', 'OVERPASS', 'UNDERPASS'])

/** Substrings that name a connection string, which carries its credentials inside (`AZURE_STORAGE_CONNECTION_STRING`). */
const CONNECTION_STRINGS = ['CONNECTION_STRING', 'CONN_STR', 'CONNSTR']

/** Word prefixes that make a name look like a secret (`CREDENTIALS`, `AUTHORIZATION`, `LICENSE`). */
const SECRET_WORD_PREFIXES = ['CRED', 'AUTHORIZ', 'AUTHENTIC', 'LICEN']

/** Names the shell itself maintains, kept although a word of theirs is `PWD`. */
const SHELL_NAMES = new Set(['PWD', 'OLDPWD'])

/** Variables that point at credentials rather than hold them. Upper-cased names or `*` patterns. */
const CREDENTIAL_POINTERS = [
  'SSH_AUTH_SOCK',
  '*_CREDENTIALS',
  'GOOGLE_APPLICATION_CREDENTIALS',
  'KUBECONFIG',
  'NETRC',
  'GIT_ASKPASS',
  'SSH_ASKPASS',
  'SUDO_ASKPASS',
  'DOCKER_CONFIG',
  'VAULT_*',
  'AWS_CONFIG_FILE',
  '*PASSFILE',
  'GNUPGHOME',
  'GPG_AGENT_INFO',
  'DBUS_SESSION_BUS_ADDRESS',
]

/** Variables a package manager sets for the script it launches. Upper-cased names or `*` patterns. */
const LAUNCH_VARIABLES = ['NPM_*', 'PNPM_*', 'INIT_CWD', 'PROJECT_CWD', 'BERRY_BIN_FOLDER', 'NODE', 'NODE_OPTIONS']

/** Launch-variable look-alikes that are the user's own configuration. */
const LAUNCH_KEPT = new Set(['PNPM_HOME'])

/** Values that carry a credential. Each is matched anywhere in the value. */
const SECRET_VALUES: ReadonlyArray<{ what: string; pattern: RegExp }> = [
  // RFC 3986 userinfo with a password: scheme "://" [user] ":" password "@".
  { what: 'a URL with a password', pattern: /[A-Za-z][A-Za-z0-9+.-]*:\/\/[^\s/@:]*:[^\s/@]*@/ },
  { what: 'a GitHub token', pattern: /(?:^|[^A-Za-z0-9])(?:gh[posur]_[A-Za-z0-9]{20,}|github_pat_[A-Za-z0-9_]{20,})/ },
  { what: 'an API secret key (sk-)', pattern: /(?:^|[^A-Za-z0-9])sk-[A-Za-z0-9_-]{16,}/ },
  // RFC 3986 query parameters naming a password (`?password=…`, `&pwd=…`).
  { what: 'a URL with a password parameter', pattern: /[?&;](?:password|passwd|pwd|pass)=[^&#;\s]/i },
  // A user name long enough to be a key (Sentry's DSN `https://<key>@host`, `https://<token>@github.com`).
  { what: 'a URL with a key as its user', pattern: /[A-Za-z][A-Za-z0-9+.-]*:\/\/[A-Za-z0-9_-]{20,}@/ },
  { what: 'a Stripe secret key', pattern: /(?:^|[^A-Za-z0-9])[sr]k_(?:live|test)_[A-Za-z0-9]{16,}/ },
  { what: 'a Hugging Face token', pattern: /(?:^|[^A-Za-z0-9])hf_[A-Za-z0-9]{30,}/ },
  { what: 'a Google API key', pattern: /(?:^|[^A-Za-z0-9])AIza[A-Za-z0-9_-]{30,}/ },
  { what: 'a Slack token', pattern: /(?:^|[^A-Za-z0-9])(?:xox[abeopr]|xapp)-[A-Za-z0-9-]{8,}/ },
  { what: 'a DigitalOcean token', pattern: /(?:^|[^A-Za-z0-9])do[opr]_v1_[a-f0-9]{32,}/ },
  { what: 'a SendGrid key', pattern: /(?:^|[^A-Za-z0-9])SG\.[A-Za-z0-9_-]{16,}\.[A-Za-z0-9_-]{16,}/ },
  { what: 'a Linear key', pattern: /(?:^|[^A-Za-z0-9])lin_(?:api|oauth)_[A-Za-z0-9]{20,}/ },
  { what: 'an AWS access key id', pattern: /(?:^|[^A-Za-z0-9])(?:AKIA|ASIA)[A-Z0-9]{16}(?![A-Za-z0-9])/ },
  { what: 'a GitLab token', pattern: /(?:^|[^A-Za-z0-9])glpat-[A-Za-z0-9_-]{16,}/ },
  { what: 'an npm token', pattern: /(?:^|[^A-Za-z0-9])npm_[A-Za-z0-9]{36}(?![A-Za-z0-9])/ },
  { what: 'a JWT', pattern: /(?:^|[^A-Za-z0-9])eyJ[A-Za-z0-9_-]{5,}\.[A-Za-z0-9_-]{5,}\.[A-Za-z0-9_-]*/ },
  // `-----BEGIN RSA PRIVATE KEY-----`, `-----BEGIN PGP PRIVATE KEY BLOCK-----`.
  { what: 'a PEM private key', pattern: /-----BEGIN [A-Z0-9 ]*PRIVATE KEY[A-Z ]*-----/ },
  // A private key's base64 body without its armour: DER PKCS#8 (`MII…IBADAN`), PKCS#1 (`MII…IBAAKC`),
  // SEC1 EC (`MHcCAQEE`), OpenSSH (`openssh-key-v1`), or a whole PEM block base64-encoded (`-----BEGIN`).
  { what: 'a private key body', pattern: /MII[A-Za-z0-9+/]{2}[AQgw]IBA(?:DAN|AKC)|MHcCAQEE|b3BlbnNzaC1rZXktdjE|LS0tLS1CRUdJTi/ },
  // RFC 6750 §2.1: `Bearer` and a b64token (a word in prose, "Bearer of…", is too short).
  { what: 'a bearer token', pattern: /(?:^|[^A-Za-z0-9])Bearer\s+[A-Za-z0-9._~+/-]{8,}/i },
  // RFC 9110 §11.6.2: an `Authorization` header of any scheme with credentials; RFC 7617 `Basic` and
  // base64 holding a digit, `+`, `/` or `=` ("Basic understanding" is kept).
  { what: 'an Authorization header', pattern: /Authorization\s*:\s*[A-Za-z][\w.-]*\s+\S/i },
  { what: 'basic credentials', pattern: /(?:^|[^A-Za-z0-9])Basic\s+(?=[A-Za-z0-9+/]*[0-9+/=])[A-Za-z0-9+/]{8,}/i },
  // Connection strings (`key=value;…`: Azure storage and Service Bus, ADO.NET, ODBC).
  { what: 'a connection-string key', pattern: /(?:^|[;\s])(?:AccountKey|SharedAccessKey|SharedAccessSignature)\s*=\s*[^;\s]/i },
  { what: 'a connection-string password', pattern: /(?:^|[;\s])(?:Password|Pwd)\s*=\s*[^;\s]/i },
  // A shared access signature: the `sig` parameter of a signed URL or connection string.
  { what: 'a shared access signature', pattern: /(?:^|[?&;])sig=[A-Za-z0-9%+/=_-]{8,}/ },
]

/** Names of configured secrets' variables (`withholdVariables`), counted per registration. */
const withheld = new Map<string, number>()

/**
 * Drops `names` from every child environment derived from now on (`dropReason`: `a configured
 * secret`), `allow` notwithstanding: the variables a composition names as the source of a secret
 * (`secrets: {NAME: {env: VAR}}`). Process-wide, as the environment is. Returns the undo.
 */
export function withholdVariables(names: readonly string[]): () => void {
  for (const name of names) withheld.set(name, (withheld.get(name) ?? 0) + 1)
  let done = false
  return () => {
    if (done) return
    done = true
    for (const name of names) {
      const count = (withheld.get(name) ?? 1) - 1
      if (count === 0) withheld.delete(name)
      else withheld.set(name, count)
    }
  }
}

export interface ScrubOptions {
  /**
   * Variables passed through from the parent although the policy would drop them: exact names
   * (case-sensitive, `HF_TOKEN`) or patterns with `*` for any run of characters (`npm_config_*`).
   * `CONCH_*` variables are never passed.
   */
  allow?: readonly string[]
  /** Explicit values added last; they win over the parent's and over the policy. */
  trusted?: Readonly<Record<string, string>>
}

/** A variable `scrubEnv` dropped, and why (`name looks like a secret (TOKEN)`, …). */
export interface DroppedVariable {
  name: string
  reason: string
}

/**
 * Why the default policy drops `name=value`, or undefined when it keeps it. Pure; see the
 * module comment for the rules.
 */
export function dropReason(name: string, value: string): string | undefined {
  const upper = name.toUpperCase()
  if (upper.startsWith(INTERNAL_PREFIX)) return 'conch-internal variable'
  if (withheld.has(name)) return 'a configured secret'
  // A look-alike letter (Cyrillic `К` in `API_КEY`) hides a word from every rule below.
  if (/[^\x21-\x7e]/.test(name)) return 'name has characters other than printable ASCII'
  const substring = SECRET_SUBSTRINGS.find((word) => upper.includes(word)) ?? CONNECTION_STRINGS.find((word) => upper.includes(word))
  if (substring) return `name looks like a secret (${substring})`
  if (!SHELL_NAMES.has(upper)) {
    const words = upper.split(/[_.-]+/)
    for (const word of words) {
      if (SECRET_WORDS.includes(word)) return `name looks like a secret (${word})`
      const prefix = SECRET_WORD_PREFIXES.find((start) => word.startsWith(start))
      if (prefix) return `name looks like a secret (${prefix}…)`
    }
    const last = words.at(-1) ?? ''
    if (SECRET_LAST_WORDS.includes(last)) return `name looks like a secret (${last})`
    if (last.endsWith('PASS') && !PASS_WORDS.has(last)) return 'name looks like a secret (…PASS)'
  }
  if (CREDENTIAL_POINTERS.some((pattern) => matches(pattern, upper))) return 'points at credentials'
  if (!LAUNCH_KEPT.has(upper) && LAUNCH_VARIABLES.some((pattern) => matches(pattern, upper))) {
    return 'package-manager launch variable'
  }
  const shape = SECRET_VALUES.find(({ pattern }) => pattern.test(value))
  if (shape) return `value looks like ${shape.what}`
  return undefined
}

/**
 * Applies the policy to `parent`: the kept environment and what was dropped, in the parent's
 * order. Undefined values are skipped silently. See `scrubbedEnv`.
 */
export function scrubEnv(
  parent: Readonly<Record<string, string | undefined>>,
  options: ScrubOptions = {},
): { env: Record<string, string>; dropped: DroppedVariable[] } {
  const allow = options.allow ?? []
  const env: Record<string, string> = {}
  const dropped: DroppedVariable[] = []
  for (const [name, value] of Object.entries(parent)) {
    if (value === undefined) continue
    const reason = dropReason(name, value)
    const internal = name.toUpperCase().startsWith(INTERNAL_PREFIX) || withheld.has(name)
    if (reason === undefined || (!internal && allow.some((pattern) => matches(pattern, name)))) {
      env[name] = value
    } else {
      dropped.push({ name, reason })
    }
  }
  Object.assign(env, options.trusted ?? {})
  return { env, dropped }
}

/**
 * The environment for a child derived from `parent`: secrets by name and value, credential
 * pointers, package-manager launch variables and `CONCH_*` dropped; names matching `allow` pass
 * through; `trusted` entries are added last and win. Returns a new object.
 *
 * ```ts
 * const env = scrubbedEnv(process.env, { allow: config.allowEnv, trusted: { LANG: 'C.UTF-8' } })
 * ```
 */
export function scrubbedEnv(
  parent: Readonly<Record<string, string | undefined>>,
  options: ScrubOptions = {},
): Record<string, string> {
  return scrubEnv(parent, options).env
}

/** Whether `name` matches `pattern`: an exact name, or `*` standing for any run of characters. */
function matches(pattern: string, name: string): boolean {
  if (!pattern.includes('*')) return pattern === name
  const source = pattern.split('*').map((part) => part.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')).join('.*')
  return new RegExp(`^${source}$`).test(name)
}

/** A fresh session tag under variable `name`: 128 random bits as 32 hex digits. */
export function createSessionTag(name: string): SessionTag {
  return { name, value: randomBytes(16).toString('hex') }
}
