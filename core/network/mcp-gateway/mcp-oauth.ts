import { randomBytes } from 'node:crypto';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { auth, type OAuthClientProvider } from '@modelcontextprotocol/sdk/client/auth.js';
import type { OAuthClientInformationMixed, OAuthClientMetadata, OAuthTokens } from '@modelcontextprotocol/sdk/shared/auth.js';
import { z } from 'zod';
import { AirlockError } from '../../../contracts/errors';
import { Emitter, type Event } from '../../common/disposable';
import type { KeyBackend } from '../../keys/keychain-backend';

/**
 * OAuth sign-in for a remote MCP server (docs/architecture.md §20, "OAuth"): the MCP authorization
 * flow (protected-resource discovery, dynamic client registration, authorization code with PKCE)
 * run on the host by the official SDK, the browser sent to the server's own sign-in page, the answer
 * taken on a one-shot loopback callback. The client registration and the tokens live in the OS
 * keychain (the server's account, as a bearer credential would) and nowhere else; the gateway uses
 * them through `McpOAuthSession`, which the SDK refreshes on the host. The sandbox never sees a token.
 */

/** How long a sign-in waits for the browser to come back. */
export const SIGN_IN_TIMEOUT_MS = 5 * 60_000;
/** Largest keychain value read as OAuth state (registration + tokens). */
const MAX_STATE_CHARS = 64 * 1024;

/** Where a session keeps its state: the keychain (or, during a sign-in, memory until it succeeded). */
type OAuthStateStore = Pick<KeyBackend, 'get' | 'set'>;

const StoredOAuthSchema = z
  .object({
    kind: z.literal('oauth'),
    client: z.record(z.string(), z.unknown()).optional(),
    tokens: z.record(z.string(), z.unknown()).optional(),
  })
  .strict();
type StoredOAuth = z.infer<typeof StoredOAuthSchema>;

/** Reads a server's OAuth state from its keychain value; anything else is treated as not signed in. */
function parseState(value: string | undefined): StoredOAuth {
  if (!value || value.length > MAX_STATE_CHARS) return { kind: 'oauth' };
  try {
    return StoredOAuthSchema.parse(JSON.parse(value));
  } catch {
    return { kind: 'oauth' };
  }
}

/**
 * A server's OAuth client as the SDK drives it, backed by the keychain. Without `redirect` it is the
 * gateway's: it can refresh tokens but never starts a sign-in (that needs the user: `login`).
 */
export class McpOAuthSession implements OAuthClientProvider {
  private verifier: string | undefined;
  private readonly saved = new Emitter<string[]>();
  /** Fires with the new secret values whenever tokens are saved (a refresh): the gateway scrubs them too. */
  readonly onDidSaveTokens: Event<string[]> = this.saved.event;

  private constructor(
    private readonly backend: OAuthStateStore,
    private readonly account: string,
    private readonly serverName: string,
    private stored: StoredOAuth,
    private readonly redirect?: { url: string; state: string; open(url: URL): void | Promise<void> },
  ) {}

  /** The session of a signed-in server; undefined when no tokens are stored. */
  static async load(backend: OAuthStateStore, account: string, serverName: string): Promise<McpOAuthSession | undefined> {
    const stored = parseState(await backend.get(account));
    return stored.tokens ? new McpOAuthSession(backend, account, serverName, stored) : undefined;
  }

  /** A fresh sign-in (a new registration: the callback's port differs each time). */
  static forSignIn(backend: OAuthStateStore, account: string, serverName: string, redirect: { url: string; state: string; open(url: URL): void | Promise<void> }): McpOAuthSession {
    return new McpOAuthSession(backend, account, serverName, { kind: 'oauth' }, redirect);
  }

  /**
   * The sign-in's callback; for the gateway's session the one registered at sign-in (the SDK takes a
   * client without one for a non-interactive grant and would never refresh).
   */
  get redirectUrl(): string {
    const registered = (this.stored.client as { redirect_uris?: unknown } | undefined)?.redirect_uris;
    return this.redirect?.url ?? (Array.isArray(registered) && typeof registered[0] === 'string' ? registered[0] : 'http://127.0.0.1/callback');
  }

  get clientMetadata(): OAuthClientMetadata {
    return {
      client_name: 'Airlock',
      redirect_uris: [this.redirectUrl],
      grant_types: ['authorization_code', 'refresh_token'],
      response_types: ['code'],
      token_endpoint_auth_method: 'none',
    };
  }

  state(): string {
    return this.redirect?.state ?? '';
  }

  clientInformation(): OAuthClientInformationMixed | undefined {
    return this.stored.client as OAuthClientInformationMixed | undefined;
  }

  async saveClientInformation(client: OAuthClientInformationMixed): Promise<void> {
    this.stored = { ...this.stored, client: { ...client } };
    await this.persist();
  }

  tokens(): OAuthTokens | undefined {
    return this.stored.tokens as OAuthTokens | undefined;
  }

  async saveTokens(tokens: OAuthTokens): Promise<void> {
    this.stored = { ...this.stored, tokens: { ...tokens } };
    await this.persist();
    this.saved.fire(this.secretValues());
  }

  async redirectToAuthorization(url: URL): Promise<void> {
    if (!this.redirect) {
      throw new AirlockError('UNAUTHORIZED', `MCP server "${this.serverName}" wants you to sign in again; run \`airlock mcp-servers login ${this.serverName}\``, { field: 'mcpServers' });
    }
    await this.redirect.open(url);
  }

  saveCodeVerifier(verifier: string): void {
    this.verifier = verifier; // Only for this sign-in, in memory.
  }

  codeVerifier(): string {
    if (!this.verifier) throw new AirlockError('INVALID_INPUT', 'no sign-in is in progress');
    return this.verifier;
  }

  async invalidateCredentials(scope: 'all' | 'client' | 'tokens' | 'verifier' | 'discovery'): Promise<void> {
    if (scope === 'verifier' || scope === 'discovery') return;
    const { client, tokens } = this.stored;
    this.stored = { kind: 'oauth', ...(scope === 'tokens' && client ? { client } : {}), ...(scope === 'client' && tokens ? { tokens } : {}) };
    await this.persist();
  }

  /** Every value that must never reach the sandbox: the tokens and a client secret, if any. */
  secretValues(): string[] {
    const t = this.stored.tokens ?? {};
    const c = this.stored.client ?? {};
    return [t.access_token, t.refresh_token, c.client_secret].filter((v): v is string => typeof v === 'string' && v.length >= 4);
  }

  private persist(): Promise<void> {
    return this.backend.set(this.account, JSON.stringify(this.stored));
  }
}

/** Whether a server's keychain value holds signed-in OAuth tokens. */
export function hasOAuthTokens(value: string | undefined): boolean {
  return parseState(value).tokens !== undefined;
}

const page = (text: string) => `<!doctype html><meta charset="utf-8"><title>Airlock</title><p style="font:16px system-ui;margin:3em">${text}</p>`;

/**
 * Signs in to `serverUrl` for the server `name`: starts a one-shot callback on 127.0.0.1, has the
 * SDK discover the authorization server and register Airlock, sends the user to the sign-in page
 * (`open`: the browser, or a printed URL) and exchanges the code it returns. The state parameter
 * must come back unchanged; the tokens are written to the keychain only when the exchange succeeded.
 */
export async function signInMcpServer(opts: {
  backend: KeyBackend;
  account: string;
  name: string;
  serverUrl: string;
  open(url: URL): void | Promise<void>;
  timeoutMs?: number;
  signal?: AbortSignal;
}): Promise<void> {
  const state = randomBytes(16).toString('hex');
  let settle!: { resolve(code: string): void; reject(err: Error): void };
  const answered = new Promise<string>((resolve, reject) => (settle = { resolve, reject }));
  answered.catch(() => undefined); // marked handled only: awaited below, where its error is the sign-in's
  const server = createServer((req: IncomingMessage, res: ServerResponse) => {
    const url = new URL(req.url ?? '/', 'http://127.0.0.1');
    if (url.pathname !== '/callback') {
      res.writeHead(404).end();
      return;
    }
    const code = url.searchParams.get('code');
    const error = url.searchParams.get('error');
    if (url.searchParams.get('state') !== state) {
      res.writeHead(400, { 'content-type': 'text/html' }).end(page('This sign-in answer is not the one Airlock asked for; nothing was saved.'));
      return;
    }
    if (!code) {
      res.writeHead(400, { 'content-type': 'text/html' }).end(page('The sign-in was not completed; nothing was saved.'));
      settle.reject(new AirlockError('UNAUTHORIZED', `the sign-in to MCP server "${opts.name}" was refused${error ? ` (${error.slice(0, 100)})` : ''}; nothing was saved`));
      return;
    }
    res.writeHead(200, { 'content-type': 'text/html' }).end(page(`Signed in to ${opts.name.replace(/[^a-z0-9-]/g, '')} for Airlock. You can close this tab.`));
    settle.resolve(code);
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => resolve());
  });
  const timer = setTimeout(() => settle.reject(new AirlockError('COMMAND_TIMEOUT', `no answer from the sign-in page of "${opts.name}" within ${Math.round((opts.timeoutMs ?? SIGN_IN_TIMEOUT_MS) / 1000)} s; run the login again`)), opts.timeoutMs ?? SIGN_IN_TIMEOUT_MS);
  const onAbort = () => settle.reject(new AirlockError('CANCELLED', 'the sign-in was cancelled; nothing was saved'));
  opts.signal?.addEventListener('abort', onAbort, { once: true });
  try {
    const redirectUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}/callback`;
    // Nothing is written until the code is exchanged: a sign-in that fails leaves the old state.
    const staged = new StagedBackend(opts.backend);
    const session = McpOAuthSession.forSignIn(staged, opts.account, opts.name, { url: redirectUrl, state, open: opts.open });
    const first = await auth(session, { serverUrl: opts.serverUrl });
    if (first !== 'AUTHORIZED') {
      const code = await answered;
      const second = await auth(session, { serverUrl: opts.serverUrl, authorizationCode: code });
      if (second !== 'AUTHORIZED') throw new AirlockError('UNAUTHORIZED', `the sign-in to MCP server "${opts.name}" did not end with tokens; run the login again`);
    }
    if (!session.tokens()) throw new AirlockError('UNAUTHORIZED', `the authorization server of "${opts.name}" gave no tokens; nothing was saved`);
    await staged.commit(opts.account);
  } finally {
    clearTimeout(timer);
    opts.signal?.removeEventListener('abort', onAbort);
    server.closeAllConnections();
    server.close();
  }
}

/** Holds the sign-in's writes in memory until the exchange succeeded. */
class StagedBackend implements OAuthStateStore {
  private readonly pending = new Map<string, string>();
  constructor(private readonly backend: KeyBackend) {}
  get(account: string): Promise<string | undefined> {
    return Promise.resolve(this.pending.get(account));
  }
  set(account: string, value: string): Promise<void> {
    this.pending.set(account, value);
    return Promise.resolve();
  }
  async commit(account: string): Promise<void> {
    const value = this.pending.get(account);
    if (value === undefined) return;
    await this.backend.probe();
    await this.backend.set(account, value);
  }
}
