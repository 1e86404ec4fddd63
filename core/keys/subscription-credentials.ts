import { z } from 'zod';
import { AirlockError } from '../../contracts/errors';

/**
 * Subscription credentials (docs/architecture.md §6): a Claude Pro/Max setup token (`claude
 * setup-token`) or a ChatGPT sign-in imported from Codex's `auth.json`. Each serves only its vendor's
 * own client; they live in the keychain entry of their provider like an API key, never elsewhere.
 */
export type CredentialKind = 'claude-subscription' | 'chatgpt-signin';

/** The agent each subscription credential may serve (the vendor's own CLI, nothing else). */
const SERVES: Record<CredentialKind, { agent: string; client: string; vendor: string }> = {
  'claude-subscription': { agent: 'claude-code', client: 'Claude Code', vendor: 'Claude subscription' },
  'chatgpt-signin': { agent: 'codex', client: 'Codex CLI', vendor: 'ChatGPT sign-in' },
};

/** The one agent a credential kind serves. */
export function credentialAgent(kind: CredentialKind): string {
  return SERVES[kind].agent;
}

/** The command that stores a provider's credential (API key, setup token or sign-in). */
export function storeCommand(providerId: string, kind: CredentialKind | undefined): string {
  if (kind === 'claude-subscription') return 'airlock keys set-subscription claude';
  if (kind === 'chatgpt-signin') return 'airlock keys import-codex';
  return `airlock keys set ${providerId}`;
}

/** Whether a credential of this kind may be used by the given agent. API keys serve every agent. */
export function credentialServes(kind: CredentialKind | undefined, agent: string | undefined): boolean {
  return kind === undefined || SERVES[kind].agent === agent;
}

/** Why an agent may not use a credential, in words a person can act on. */
export function credentialRefusal(kind: CredentialKind, providerId: string, agent: string | undefined): string {
  const s = SERVES[kind];
  return `The ${s.vendor} ('${providerId}') serves only ${s.client} (agent '${s.agent}'), not the ${agent ?? 'unknown'} agent. Start the run with --agent ${s.agent}, or choose a provider with an API key.`;
}

/** Throws FORBIDDEN (field `provider`) when the run's agent may not use the provider's credential. */
export function assertCredentialServes(provider: { id: string; credential?: CredentialKind }, agent: string): void {
  if (!credentialServes(provider.credential, agent)) {
    throw new AirlockError('FORBIDDEN', credentialRefusal(provider.credential!, provider.id, agent), { field: 'provider' });
  }
}

/** Checks a pasted Claude setup token; returns it trimmed. Never echoes the value. */
export function parseClaudeSetupToken(raw: string): string {
  const token = raw.trim();
  if (/^sk-ant-api/.test(token)) {
    throw new AirlockError('INVALID_INPUT', 'That is an Anthropic API key, not a subscription token; store it with `airlock keys set anthropic`. A subscription token comes from `claude setup-token` and starts with "sk-ant-oat".', { field: 'key' });
  }
  if (token.length < 20 || token.length > 4096 || /[\s\u0000-\u001f]/.test(token)) {
    throw new AirlockError('INVALID_INPUT', 'That does not look like a Claude setup token (too short, or it contains spaces); run `claude setup-token` and paste the whole token it prints.', { field: 'key' });
  }
  return token;
}

/** A ChatGPT sign-in as Airlock keeps it (one keychain entry, JSON). */
export interface ChatgptSignin {
  accessToken: string;
  refreshToken: string;
  idToken: string;
  accountId: string;
  /** ISO time the access token expires, when known (the JWT's `exp`, or `expires_in` of a refresh). */
  expiresAt?: string;
  /** ISO time of the last refresh (Codex's `last_refresh`). */
  lastRefresh?: string;
}

/** Non-secret claims of an id token that the client reads (plan, account, user). */
export interface SigninClaims {
  planType?: string;
  accountId?: string;
  userId?: string;
}

const AUTH_CLAIM = 'https://api.openai.com/auth';

/** The payload of a JWT, or undefined when the string is not one (signature not checked). */
export function jwtPayload(jwt: string): Record<string, unknown> | undefined {
  const parts = jwt.split('.');
  if (parts.length !== 3 || !parts[1]) return undefined;
  try {
    const value: unknown = JSON.parse(Buffer.from(parts[1], 'base64url').toString('utf8'));
    return value && typeof value === 'object' && !Array.isArray(value) ? (value as Record<string, unknown>) : undefined;
  } catch {
    return undefined;
  }
}

/** The expiry of a JWT (its `exp`) as ISO time, when it has one. */
export function jwtExpiry(jwt: string): string | undefined {
  const exp = jwtPayload(jwt)?.exp;
  return typeof exp === 'number' && Number.isFinite(exp) ? new Date(exp * 1000).toISOString() : undefined;
}

/** The claims Codex reads from an id token (`https://api.openai.com/auth`). */
export function signinClaims(idToken: string): SigninClaims {
  const auth = jwtPayload(idToken)?.[AUTH_CLAIM];
  const a = auth && typeof auth === 'object' ? (auth as Record<string, unknown>) : {};
  const s = (v: unknown) => (typeof v === 'string' && v.length <= 200 ? v : undefined);
  const out: SigninClaims = {};
  const plan = s(a.chatgpt_plan_type);
  const account = s(a.chatgpt_account_id);
  const user = s(a.chatgpt_user_id) ?? s(a.user_id);
  if (plan) out.planType = plan;
  if (account) out.accountId = account;
  if (user) out.userId = user;
  return out;
}

/** An unsigned JWT (`alg: none`) carrying only the given non-secret claims: what a sandbox may see. */
export function unsignedIdToken(claims: SigninClaims): string {
  const part = (o: unknown) => Buffer.from(JSON.stringify(o)).toString('base64url');
  const auth: Record<string, string> = {};
  if (claims.planType) auth.chatgpt_plan_type = claims.planType;
  if (claims.accountId) auth.chatgpt_account_id = claims.accountId;
  if (claims.userId) auth.chatgpt_user_id = claims.userId;
  return `${part({ alg: 'none', typ: 'JWT' })}.${part({ [AUTH_CLAIM]: auth })}.airlock-unsigned`;
}

function tokenField(tokens: Record<string, unknown>, name: string): string {
  const v = tokens[name];
  if (typeof v !== 'string' || !v.trim() || v.length > 16_384 || /\s/.test(v.trim())) {
    throw new AirlockError('INVALID_INPUT', `The Codex sign-in has no usable tokens.${name}; sign in again with \`codex login\` (ChatGPT) and import again.`, { field: 'key' });
  }
  return v.trim();
}

/**
 * Reads Codex's `auth.json` (`{tokens: {id_token, access_token, refresh_token, account_id}, last_refresh}`)
 * into a ChatgptSignin. Errors name the missing part, never a value.
 */
export function parseCodexAuthJson(text: string): ChatgptSignin {
  let doc: unknown;
  try {
    doc = JSON.parse(text);
  } catch {
    throw new AirlockError('INVALID_INPUT', 'That is not Codex\'s auth.json (not valid JSON); import ~/.codex/auth.json after `codex login`, or paste its whole content.', { field: 'key' });
  }
  const tokens = doc && typeof doc === 'object' ? (doc as Record<string, unknown>).tokens : undefined;
  if (!tokens || typeof tokens !== 'object') {
    throw new AirlockError('INVALID_INPUT', 'This auth.json holds no ChatGPT sign-in (no "tokens"; an API-key login is stored with `airlock keys set openai`). Sign in with `codex login` and choose ChatGPT, then import again.', { field: 'key' });
  }
  const t = tokens as Record<string, unknown>;
  const idToken = tokenField(t, 'id_token');
  const accessToken = tokenField(t, 'access_token');
  const refreshToken = tokenField(t, 'refresh_token');
  const accountId = (typeof t.account_id === 'string' && t.account_id) || signinClaims(idToken).accountId;
  if (!accountId || accountId.length > 200) {
    throw new AirlockError('INVALID_INPUT', 'The Codex sign-in names no ChatGPT account (tokens.account_id); sign in again with `codex login` and import again.', { field: 'key' });
  }
  const lastRefresh = (doc as Record<string, unknown>).last_refresh;
  const expiresAt = jwtExpiry(accessToken);
  return { accessToken, refreshToken, idToken, accountId, ...(expiresAt ? { expiresAt } : {}), ...(typeof lastRefresh === 'string' ? { lastRefresh } : {}) };
}

/** The keychain form of a sign-in. */
export function serializeSignin(s: ChatgptSignin): string {
  return JSON.stringify({ v: 1, ...s });
}

/** The keychain entry of a ChatGPT sign-in (`serializeSignin`), version 1. */
const StoredSignin = z.object({
  v: z.literal(1),
  accessToken: z.string().min(1),
  refreshToken: z.string().min(1),
  idToken: z.string().min(1),
  accountId: z.string().min(1),
  expiresAt: z.string().optional(),
  lastRefresh: z.string().optional(),
});

/**
 * Reads a keychain entry back; a broken entry is a clear error naming the field, not a crash. The
 * message never holds a value of the entry (they are tokens).
 */
export function deserializeSignin(stored: string): ChatgptSignin {
  let raw: unknown;
  try {
    raw = JSON.parse(stored);
  } catch {
    throw new AirlockError('KEY_MISSING', 'The stored ChatGPT sign-in is unreadable (its keychain entry is not JSON); import it again with `airlock keys import-codex`.');
  }
  const parsed = StoredSignin.safeParse(raw);
  if (!parsed.success) {
    const field = parsed.error.issues[0]?.path.join('.') || 'entry';
    throw new AirlockError('KEY_MISSING', `The stored ChatGPT sign-in is unreadable (field ${field} of its keychain entry is missing or wrong); import it again with \`airlock keys import-codex\`.`);
  }
  const { v: _v, expiresAt, lastRefresh, ...signin } = parsed.data;
  return { ...signin, ...(expiresAt ? { expiresAt } : {}), ...(lastRefresh ? { lastRefresh } : {}) };
}
