import { randomBytes } from 'node:crypto';
import type { ServerResponse } from 'node:http';
import { sha256Hex } from '../common/sha256';

/**
 * What a sandbox gets instead of a subscription credential (docs/architecture.md §6). A Claude
 * subscription needs only the run token (as CLAUDE_CODE_OAUTH_TOKEN). A ChatGPT sign-in becomes
 * Codex's auth.json with placeholders: the access token is the run token, the refresh token a
 * second run-scoped random value, the id token unsigned and carrying only non-secret claims.
 */
export type SandboxCredential =
  | { kind: 'claude-subscription' }
  | { kind: 'chatgpt-signin'; refreshToken: string; idToken: string; accountId: string };

interface Placeholders {
  runId: string;
  accessToken: string;
  refreshToken: string;
  idToken: string;
}

const digest = (v: string) => sha256Hex(v);

/** The refresh placeholders handed to sandboxes, by digest; they die with their run. */
export class SandboxSignins {
  private readonly byRefresh = new Map<string, Placeholders>();

  issue(runId: string, runToken: string, idToken: string, accountId: string): SandboxCredential {
    const refreshToken = `airlock-refresh-${randomBytes(32).toString('base64url')}`;
    this.byRefresh.set(digest(refreshToken), { runId, accessToken: runToken, refreshToken, idToken });
    return { kind: 'chatgpt-signin', refreshToken, idToken, accountId };
  }

  /** The placeholders behind a presented refresh token, or undefined (unknown or revoked). */
  check(refreshToken: unknown): Placeholders | undefined {
    if (typeof refreshToken !== 'string' || refreshToken.length > 512) return undefined;
    return this.byRefresh.get(digest(refreshToken));
  }

  revokeRun(runId: string): void {
    for (const [d, p] of this.byRefresh) if (p.runId === runId) this.byRefresh.delete(d);
  }
}

function sendJson(res: ServerResponse, status: number, body: unknown): void {
  const text = JSON.stringify(body);
  res.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text), 'cache-control': 'no-store' });
  res.end(text);
}

/**
 * Answers a client's own token refresh (Codex posts `{grant_type: "refresh_token", refresh_token}`
 * to CODEX_REFRESH_TOKEN_URL_OVERRIDE, which points here). A valid placeholder gets the same
 * placeholders back; the real refresh token is neither needed nor touched — the proxy refreshes the
 * real sign-in on its own when the upstream asks for it.
 */
export function answerSandboxRefresh(signins: SandboxSignins, body: Buffer | undefined, res: ServerResponse): void {
  let presented: unknown;
  try {
    const parsed: unknown = body ? JSON.parse(body.toString('utf8')) : undefined;
    presented = parsed && typeof parsed === 'object' ? (parsed as Record<string, unknown>).refresh_token : undefined;
  } catch {
    presented = undefined;
  }
  const found = signins.check(presented);
  if (!found) {
    sendJson(res, 401, { error: 'invalid_grant', error_description: 'unknown or revoked Airlock refresh placeholder' });
    return;
  }
  sendJson(res, 200, { access_token: found.accessToken, refresh_token: found.refreshToken, id_token: found.idToken, token_type: 'Bearer', expires_in: 3600 });
}
