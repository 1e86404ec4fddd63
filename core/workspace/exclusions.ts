/**
 * What never leaves the user's machine by default (docs/architecture.md §2.4): credential-looking files,
 * decided first by name and, where a name alone says little (`.npmrc`, JSON files), by content.
 */

/** Why a path was left out of the copy. */
export type ExclusionKind = 'git' | 'gitignore' | 'secret' | 'too-large' | 'option' | 'special';

export interface Exclusion {
  kind: ExclusionKind;
  reason: string;
}

interface NameRule {
  test: (name: string, rel: string) => boolean;
  reason: string;
}

const base = (rel: string) => rel.slice(rel.lastIndexOf('/') + 1);

/** Name rules for files (and, where noted, whole directories). */
const FILE_RULES: NameRule[] = [
  { test: (n) => n.startsWith('.env'), reason: 'environment file (.env*) may hold secrets' },
  { test: (n) => /^id_(rsa|dsa|ecdsa|ed25519|xmss)(?!.*\.pub$)/.test(n), reason: 'SSH private key' },
  { test: (n) => /\.(pem|key|p12|pfx|jks|keystore|ppk|p8)$/i.test(n), reason: 'private key or certificate store' },
  { test: (_n, rel) => /(^|\/)\.aws\/(credentials|config)$/.test(rel), reason: 'AWS credentials' },
  { test: (n) => n === '.netrc' || n === '_netrc', reason: 'netrc credentials' },
  { test: (n) => n === '.git-credentials', reason: 'git credential store' },
  { test: (_n, rel) => /(^|\/)\.docker\/config\.json$/.test(rel), reason: 'Docker registry credentials' },
  { test: (n) => n === 'application_default_credentials.json' || n === 'credentials.db' || n === 'access_tokens.db' || n === 'legacy_credentials', reason: 'Google Cloud credentials' },
  { test: (_n, rel) => /(^|\/)\.kube\/config$/.test(rel) || base(rel) === 'kubeconfig', reason: 'Kubernetes credentials' },
  { test: (n) => n === '.pgpass' || n === '.my.cnf' || n === '.htpasswd', reason: 'database or web server credentials' },
  { test: (n) => n === 'credentials.tfrc.json' || n === '.terraformrc' || n === 'terraform.rc', reason: 'Terraform registry credentials' },
  { test: (n) => /\.tfstate(\.backup)?$/.test(n), reason: 'Terraform state (often holds secrets)' },
  { test: (_n, rel) => /(^|\/)\.gem\/credentials$/.test(rel), reason: 'RubyGems credentials' },
  { test: (n) => n === '.vault-token', reason: 'Vault token' },
  // Agents' and tools' sign-ins (issue 36): a copied home folder handed these back to a client.
  { test: (_n, rel) => /(^|\/)\.codex\/auth\.json$/.test(rel), reason: 'Codex sign-in' },
  { test: (_n, rel) => /(^|\/)\.claude\/\.credentials\.json$/.test(rel), reason: 'Claude Code sign-in' },
  { test: (_n, rel) => /(^|\/)\.config\/gh\/hosts\.ya?ml$/.test(rel), reason: 'GitHub CLI sign-in' },
  { test: (n, rel) => n.startsWith('credentials') && /(^|\/)\.config\//.test(rel), reason: 'credentials under .config' },
  { test: (n) => /_history$/.test(n) || n === '.histfile' || n === '.zhistory' || n === '.lesshst', reason: 'shell or REPL history (commands typed, often with tokens)' },
  { test: (n) => n === 'login data' || n === 'login data for account' || n === 'key3.db' || n === 'key4.db' || n === 'cookies.sqlite' || n === 'logins.json', reason: 'browser saved logins or cookies' },
];

/** Directories left out as a whole. */
const DIR_RULES: NameRule[] = [
  { test: (n) => n === '.ssh', reason: 'SSH directory (keys, known hosts)' },
  { test: (n) => n === '.gnupg', reason: 'GnuPG keyring' },
  { test: (_n, rel) => /(^|\/)\.config\/gcloud$/.test(rel) || rel === 'gcloud', reason: 'Google Cloud credentials' },
  { test: (n) => n === '.azure', reason: 'Azure credentials' },
  // Browser profiles: saved passwords, cookies and session tokens.
  { test: (n, rel) => n === '.mozilla' || n === '.thunderbird' || /(^|\/)\.config\/(google-chrome(-beta|-unstable)?|chromium|bravesoftware|microsoft-edge(-beta|-dev)?|vivaldi|opera)$/.test(rel) || /(^|\/)library\/application support\/(google\/chrome|chromium|firefox|bravesoftware|microsoft edge|vivaldi)$/.test(rel) || /(^|\/)snap\/(firefox|chromium)$/.test(rel), reason: 'browser profile (saved passwords, cookies)' },
  { test: (n) => n === '.password-store', reason: 'pass password store' },
];

/** Files whose name alone is harmless but whose content may carry a registry token. */
const TOKEN_FILES = new Set(['.npmrc', '.pypirc', '.yarnrc.yml', '.yarnrc', 'pip.conf', 'pip.ini', '.pip.conf', '.gemrc', 'bunfig.toml', '.condarc']);
const TOKEN_PATTERN = /(_authToken|_auth\s*=|_password|npmAuthToken|^\s*password\s*[=:]|^\s*token\s*[=:]|\/\/[^\s:@]+:[^\s@]+@)/im;

/**
 * Checks a path by name. `isDir` decides which rule set applies. Names compare case-insensitively:
 * `.ENV` is the same file as `.env` on a case-insensitive file system, and a secret either way.
 */
export function exclusionByName(rel: string, isDir: boolean): Exclusion | undefined {
  const lower = rel.toLowerCase();
  const name = base(lower);
  for (const rule of isDir ? DIR_RULES : FILE_RULES) {
    if (rule.test(name, lower)) return { kind: 'secret', reason: rule.reason };
  }
  return undefined;
}

/** True when a file must be read before it can be judged (cheap: a handful of names). */
export function needsTokenInspection(rel: string): boolean {
  return TOKEN_FILES.has(base(rel.toLowerCase()));
}

/** Whether a path component is git metadata (`.git`, any case: on a case-insensitive disk `.GIT` is `.git`). */
export function isGitMetadataName(name: string): boolean {
  return name.toLowerCase() === '.git';
}

const PRIVATE_KEY_MARK = Buffer.from('PRIVATE KEY-----');
const PRIVATE_KEY_BLOCK = /^-----BEGIN ([A-Z0-9]+ )*PRIVATE KEY-----\r?\n[A-Za-z0-9+/=\r\n:,\- ]{64,}/m;
const SERVICE_ACCOUNT_MARK = Buffer.from('"private_key"');
const AWS_SECRET_MARK = Buffer.from('aws_secret_access_key');

/**
 * Judges a file by its content: registry config with tokens, private key blocks, cloud
 * service-account JSON, AWS credential files under other names. Cheap prefilters keep this fast
 * enough to run on every file of a large project.
 */
export function exclusionByContent(rel: string, content: Buffer): Exclusion | undefined {
  if (needsTokenInspection(rel) && TOKEN_PATTERN.test(content.toString('utf8'))) {
    return { kind: 'secret', reason: 'package registry config with an auth token or password' };
  }
  if (content.includes(PRIVATE_KEY_MARK) && PRIVATE_KEY_BLOCK.test(content.toString('latin1'))) {
    return { kind: 'secret', reason: 'contains a private key block' };
  }
  if (rel.toLowerCase().endsWith('.json') && content.includes(SERVICE_ACCOUNT_MARK) && content.includes(Buffer.from('"client_email"'))) {
    return { kind: 'secret', reason: 'cloud service-account key (JSON with private_key)' };
  }
  if (content.includes(AWS_SECRET_MARK) && /^\s*aws_secret_access_key\s*=\s*\S+/m.test(content.toString('utf8'))) {
    return { kind: 'secret', reason: 'AWS secret access key' };
  }
  return undefined;
}
