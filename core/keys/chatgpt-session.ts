import http from 'node:http';
import https from 'node:https';
import { AirlockError } from '../../contracts/errors';
import { Secret } from './secret';
import { jwtExpiry, signinClaims, type ChatgptSignin, type SigninClaims } from './subscription-credentials';

/** Codex CLI's public OAuth client id: a refresh must name the client the sign-in was issued to. */
export const CODEX_OAUTH_CLIENT_ID = 'app_EMoamEEZ73f0CkXaXp7hrann';
/** Refresh this long before the access token expires, as the client itself would. */
const REFRESH_MARGIN_MS = 5 * 60_000;
const REFRESH_TIMEOUT_MS = 20_000;
const MAX_ANSWER = 1024 * 1024;
/** After a refresh that failed for a reason other than a refusal (auth server down), wait this long before asking again. */
const FAILED_REFRESH_BACKOFF_MS = 30_000;

export interface ChatgptSessionOptions {
  /** The auth server, e.g. `https://auth.openai.com`; the refresh goes to `<authBaseUrl>/oauth/token`. */
  authBaseUrl: string;
  /** Stores refreshed tokens where the sign-in came from (the keychain entry, or this session). */
  persist(signin: ChatgptSignin): Promise<void>;
}

/**
 * A ChatGPT sign-in in use by the proxy (docs/architecture.md §6): hands out the current access
 * token and account id, and refreshes with the real refresh token — once for any number of callers
 * at a time — when the token is near expiry or the upstream refused it. The real refresh token is
 * used only here, toward the auth server; it never reaches a sandbox.
 *
 * No refresh storm: each access token is refreshed at most once because the upstream refused it,
 * and a token that a refusal-triggered refresh just issued and that the upstream refuses too is a
 * clear error (the account, not the token, is the problem), never another refresh. A refresh the
 * auth server refused is not asked again for the same token; one that failed otherwise (the auth
 * server unreachable) waits `FAILED_REFRESH_BACKOFF_MS` before the next try.
 */
export class ChatgptSession {
  #signin: ChatgptSignin;
  private refreshing: Promise<void> | undefined;
  /** The access token the last refusal-triggered refresh issued. */
  #issuedAfterRefusal: string | undefined;
  /** The last refresh that failed: for which access token, why, and until when it stands. */
  #failed: { token: string; error: unknown; until: number } | undefined;

  constructor(signin: Secret<ChatgptSignin>, private readonly opts: ChatgptSessionOptions) {
    this.#signin = { ...signin.reveal() };
  }

  get accessToken(): Secret {
    return new Secret(this.#signin.accessToken);
  }

  get accountId(): string {
    return this.#signin.accountId;
  }

  /** The non-secret claims a client may see (plan, account, user). */
  get claims(): SigninClaims {
    return { ...signinClaims(this.#signin.idToken), accountId: this.#signin.accountId };
  }

  /** Whether this session still holds the sign-in that is stored (it was not re-imported meanwhile). */
  holds(stored: Secret<ChatgptSignin>): boolean {
    const s = stored.reveal();
    return s.refreshToken === this.#signin.refreshToken || s.accessToken === this.#signin.accessToken;
  }

  /** True when the access token expires within the margin (unknown expiry: false, the 401 path covers it). */
  expiresSoon(now = Date.now()): boolean {
    const at = this.#signin.expiresAt ? Date.parse(this.#signin.expiresAt) : NaN;
    return Number.isFinite(at) && at - now < REFRESH_MARGIN_MS;
  }

  /**
   * Refreshes the sign-in; resolves true for the one caller whose call started the refresh (callers
   * meanwhile share it and get false). With `usedToken` (the access token an upstream refused),
   * nothing is done when the token has changed since: another call already refreshed it.
   */
  refresh(usedToken?: Secret): Promise<boolean> {
    if (usedToken && usedToken.reveal() !== this.#signin.accessToken) return Promise.resolve(false);
    if (this.refreshing) return this.refreshing.then(() => false);
    const failed = this.#failed;
    if (failed && failed.token === this.#signin.accessToken && Date.now() < failed.until) return Promise.reject(failed.error);
    const token = this.#signin.accessToken;
    this.refreshing = this.doRefresh().then(
      () => {
        this.refreshing = undefined;
        this.#failed = undefined;
      },
      (error: unknown) => {
        this.refreshing = undefined;
        const refused = error instanceof AirlockError && error.kind === 'UNAUTHORIZED';
        this.#failed = { token, error, until: refused ? Infinity : Date.now() + FAILED_REFRESH_BACKOFF_MS };
        throw error;
      },
    );
    return this.refreshing.then(() => true);
  }

  /**
   * The upstream refused `usedToken` (HTTP 401): refreshes once for that token (resolves true for
   * the caller that started it, false when another call already replaced the token: retry with the
   * current one). A token that such a refresh issued and that is refused again rejects with a clear
   * UNAUTHORIZED error instead of refreshing again.
   */
  refreshAfterRefusal(usedToken: Secret): Promise<boolean> {
    const used = usedToken.reveal();
    if (used === this.#signin.accessToken && used === this.#issuedAfterRefusal) {
      return Promise.reject(
        new AirlockError('UNAUTHORIZED', 'ChatGPT refused the sign-in again right after it was refreshed, so the account (not the token) is refused: check the ChatGPT plan of this account, then run `codex login` on this machine and `airlock keys import-codex`.'),
      );
    }
    return this.refresh(usedToken).then((started) => {
      if (started) this.#issuedAfterRefusal = this.#signin.accessToken;
      return started;
    });
  }

  private async doRefresh(): Promise<void> {
    const answer = await postJson(`${this.opts.authBaseUrl.replace(/\/+$/, '')}/oauth/token`, {
      client_id: CODEX_OAUTH_CLIENT_ID,
      grant_type: 'refresh_token',
      refresh_token: this.#signin.refreshToken,
      scope: 'openid profile email',
    });
    if (answer.status === 400 || answer.status === 401 || answer.status === 403) {
      throw new AirlockError('UNAUTHORIZED', `ChatGPT refused to refresh the sign-in (HTTP ${answer.status}); it was signed out or the refresh token was used elsewhere. Run \`codex login\` on this machine, then \`airlock keys import-codex\`.`);
    }
    const body = answer.body;
    const access = typeof body?.access_token === 'string' ? body.access_token : undefined;
    if (answer.status !== 200 || !access) {
      throw new AirlockError('UPSTREAM_ERROR', `The ChatGPT auth server answered HTTP ${answer.status} to a token refresh; try again later.`);
    }
    const now = Date.now();
    const expiresIn = typeof body?.expires_in === 'number' && body.expires_in > 0 ? body.expires_in : undefined;
    const expiresAt = jwtExpiry(access) ?? (expiresIn ? new Date(now + expiresIn * 1000).toISOString() : undefined);
    const next: ChatgptSignin = {
      accessToken: access,
      refreshToken: typeof body?.refresh_token === 'string' && body.refresh_token ? body.refresh_token : this.#signin.refreshToken,
      idToken: typeof body?.id_token === 'string' && body.id_token ? body.id_token : this.#signin.idToken,
      accountId: this.#signin.accountId,
      lastRefresh: new Date(now).toISOString(),
      ...(expiresAt ? { expiresAt } : {}),
    };
    // Stored first: a rotated refresh token that is lost would sign the user out.
    await this.opts.persist(next);
    this.#signin = next;
  }
}

/** POSTs JSON and reads a bounded JSON answer. Errors never carry the request body. */
function postJson(url: string, payload: Record<string, string>): Promise<{ status: number; body: Record<string, unknown> | undefined }> {
  const target = new URL(url);
  const data = Buffer.from(JSON.stringify(payload));
  return new Promise((resolve, reject) => {
    const req = (target.protocol === 'https:' ? https : http).request(target, {
      method: 'POST',
      headers: { 'content-type': 'application/json', accept: 'application/json', 'content-length': data.length },
      timeout: REFRESH_TIMEOUT_MS,
    }, (res) => {
      const chunks: Buffer[] = [];
      let size = 0;
      res.on('data', (c: Buffer) => {
        size += c.length;
        if (size <= MAX_ANSWER) chunks.push(c);
      });
      res.on('end', () => {
        let body: Record<string, unknown> | undefined;
        try {
          const v: unknown = JSON.parse(Buffer.concat(chunks).toString('utf8'));
          body = v && typeof v === 'object' && !Array.isArray(v) ? (v as Record<string, unknown>) : undefined;
        } catch {
          body = undefined;
        }
        resolve({ status: res.statusCode ?? 0, body });
      });
      res.on('error', () => reject(new AirlockError('UPSTREAM_ERROR', 'the ChatGPT auth server closed the connection during a token refresh; try again')));
    });
    req.on('timeout', () => req.destroy(new Error('timeout')));
    req.on('error', (err: NodeJS.ErrnoException) => reject(new AirlockError('UPSTREAM_ERROR', `could not reach the ChatGPT auth server at ${target.origin} to refresh the sign-in (${err.code ?? err.message})`)));
    req.end(data);
  });
}
