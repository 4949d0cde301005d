/**
 * Secret-bearing variables a real deployment carries: each must be dropped by the default
 * scrubbing policy. Shared by the unit test here and the real-terminal test in pty-local.
 * Values are shaped like the real thing and unique, so a test can grep for them.
 */
export const SECRET_VARIABLES: Readonly<Record<string, string>> = {
  DATABASE_URL: 'postgres://app:db-pw-1@db.internal:5432/app',
  REDIS_URL: 'redis://:redis-pw-2@cache.internal:6379/0',
  HTTPS_PROXY: 'http://proxyuser:proxy-pw-3@proxy.internal:3128',
  MYSQL_PWD: 'mysql-pw-4',
  PGPASSWD: 'pg-pw-5',
  PASSWD: 'passwd-6',
  GH_PAT: 'pat-value-7',
  NPM_CONFIG__AUTH: 'npm-auth-8',
  HF_AUTH: 'hf-auth-9',
  AUTH_HEADER: 'Bearer header-10',
  CREDENTIALS: 'cred-11',
  DOCKER_AUTH_CONFIG: '{"auths":{"x":"docker-12"}}',
  PRIVATE_PEM: 'pem-13',
  SLACK_WEBHOOK_URL: 'https://hooks.slack.example/services/webhook-14',
  SENTRY_DSN: 'https://dsn-15@o1.ingest.sentry.example/1',
  SSH_AUTH_SOCK: '/tmp/ssh-agent-16.sock',
  GOOGLE_APPLICATION_CREDENTIALS: '/secrets/gcp-17.json',
  KUBECONFIG: '/secrets/kube-18.yaml',
  NETRC: '/secrets/netrc-19',
  GIT_ASKPASS: '/usr/local/bin/askpass-20',
  VAULT_ADDR: 'https://vault-21.internal:8200',
  AWS_SHARED_CREDENTIALS_FILE: '/secrets/aws-22',
  SSH_ASKPASS: '/usr/bin/ssh-askpass-23',
  DOCKER_CONFIG: '/secrets/docker-24',
  VAULT_NAMESPACE: 'vault-ns-25',
  NODE_OPTIONS: '--no-deprecation --trace-uncaught',
  npm_config_registry: 'https://registry-27.example/',
  npm_lifecycle_event: 'lifecycle-28',
  npm_package_name: 'package-29',
  pnpm_config_verify_deps_before_run: 'pnpm-30',
  INIT_CWD: '/work/init-cwd-31',
}

/** Innocent names with token-shaped values (each a fake credential of the named kind). */
export const TOKEN_VALUES: Readonly<Record<string, string>> = {
  SETTING_GITHUB: 'ghp_' + 'A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8',
  SETTING_GITHUB_USER: 'gho_' + 'Z9y8X7w6V5u4T3s2R1q0P9o8N7m6L5k4J3i2',
  SETTING_GITHUB_APP: 'ghs_' + 'B1c2D3e4F5g6H7i8J9k0L1m2N3o4P5q6R7s8',
  SETTING_GITHUB_FINE: 'github_pat_' + '11ABCDEFG0123456789_abcdefghijklmnopqrstuvwxyz',
  SETTING_OPENAI: 'sk-' + 'proj-abcdefghijklmnopqrstuvwxyz012345',
  SETTING_SLACK: 'xoxb-' + '123456789012-1234567890123-abcdefghijklmnop',
  SETTING_AWS: 'AKIA' + 'IOSFODNN7EXAMPLE',
  SETTING_AWS_TEMP: 'ASIA' + 'Y34FZKBOKMUTVV7A',
  SETTING_GITLAB: 'glpat-' + 'abcdefghij0123456789',
  SETTING_NPM: 'npm_' + 'abcdefghijklmnopqrstuvwxyz0123456789',
  SETTING_JWT: 'eyJhbGciOiJIUzI1NiJ9' + '.eyJzdWIiOiJ4In0.c2lnbmF0dXJl',
  SETTING_PEM: '-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXk=\n-----END OPENSSH PRIVATE KEY-----',
  SETTING_HEADER: 'Authorization: Bearer ghp_' + 'Q1w2E3r4T5y6U7i8O9p0A1s2D3f4G5h6J7k8',
}

/** Variables that must survive: the shell's own, and look-alikes that are not secrets. */
export const KEPT_VARIABLES: Readonly<Record<string, string>> = {
  PWD: '/work/here',
  OLDPWD: '/work/before',
  PATH: '/usr/local/bin:/usr/bin:/bin',
  GIT_AUTHOR_NAME: 'Ada',
  PNPM_HOME: '/root/.local/share/pnpm',
  PAGER_STYLE: 'plain',
  HOMEPAGE_URL: 'https://example.org/docs',
  REPO_URL: 'git+ssh://git@example.org/repo.git',
  SK_LIKE: 'sk-short',
}
