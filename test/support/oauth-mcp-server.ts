import { randomUUID } from 'node:crypto';
import type { Server as HttpServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import express, { type Response } from 'express';
import { InvalidTokenError } from '@modelcontextprotocol/sdk/server/auth/errors.js';
import { requireBearerAuth } from '@modelcontextprotocol/sdk/server/auth/middleware/bearerAuth.js';
import type { OAuthRegisteredClientsStore } from '@modelcontextprotocol/sdk/server/auth/clients.js';
import type { AuthorizationParams, OAuthServerProvider } from '@modelcontextprotocol/sdk/server/auth/provider.js';
import { getOAuthProtectedResourceMetadataUrl, mcpAuthRouter } from '@modelcontextprotocol/sdk/server/auth/router.js';
import type { AuthInfo } from '@modelcontextprotocol/sdk/server/auth/types.js';
import { Server } from '@modelcontextprotocol/sdk/server/index.js';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import type { OAuthClientInformationFull, OAuthTokens } from '@modelcontextprotocol/sdk/shared/auth.js';
import { CallToolRequestSchema, ListToolsRequestSchema } from '@modelcontextprotocol/sdk/types.js';

/** What the test sees of the server: its tokens, and how to make them stale. */
export interface OAuthMcpServer {
  /** `http://127.0.0.1:<port>/mcp`, protected by the bearer tokens this server's own authorization server issues. */
  url: string;
  /** Every access token issued, in order (the first by the sign-in, later ones by refreshes). */
  issued: string[];
  /** Refresh grants answered. */
  refreshes: number;
  /** Makes every access token issued so far invalid (what expiry does): the next call must refresh. */
  expireAccessTokens(): void;
  close(): Promise<void>;
}

class Clients implements OAuthRegisteredClientsStore {
  private readonly clients = new Map<string, OAuthClientInformationFull>();
  getClient(id: string) {
    return this.clients.get(id);
  }
  registerClient(client: OAuthClientInformationFull) {
    this.clients.set(client.client_id, client);
    return client;
  }
}

/**
 * One process that is both an OAuth authorization server (the official SDK's router: metadata,
 * dynamic registration, authorize, token with PKCE and refresh) and an MCP server that accepts only
 * its access tokens. `authorize` approves at once, as a user who signs in would, and redirects to
 * the client's registered callback with the code and state. Tool `whoami` answers with the token it
 * was sent (a careless server), so a test can see the gateway scrub it.
 */
export async function startOAuthMcpServer(): Promise<OAuthMcpServer> {
  const issued: string[] = [];
  const valid = new Set<string>();
  const codes = new Map<string, { client: string; params: AuthorizationParams }>();
  const refreshTokens = new Set<string>();
  const state = { refreshes: 0 };
  const newTokens = (): OAuthTokens => {
    const access = `oauth-access-${randomUUID()}`;
    const refresh = `oauth-refresh-${randomUUID()}`;
    issued.push(access);
    valid.add(access);
    refreshTokens.add(refresh);
    return { access_token: access, token_type: 'bearer', expires_in: 3600, refresh_token: refresh };
  };
  const provider: OAuthServerProvider = {
    clientsStore: new Clients(),
    authorize(client: OAuthClientInformationFull, params: AuthorizationParams, res: Response) {
      if (!client.redirect_uris.includes(params.redirectUri)) throw new Error('unregistered redirect_uri');
      const code = randomUUID();
      codes.set(code, { client: client.client_id, params });
      const target = new URL(params.redirectUri);
      target.searchParams.set('code', code);
      if (params.state !== undefined) target.searchParams.set('state', params.state);
      res.redirect(target.href);
      return Promise.resolve();
    },
    challengeForAuthorizationCode(_client, code) {
      const c = codes.get(code);
      if (!c) throw new Error('unknown code');
      return Promise.resolve(c.params.codeChallenge);
    },
    exchangeAuthorizationCode(client, code) {
      const c = codes.get(code);
      if (!c || c.client !== client.client_id) throw new Error('unknown code');
      codes.delete(code);
      return Promise.resolve(newTokens());
    },
    exchangeRefreshToken(_client, refreshToken) {
      if (!refreshTokens.delete(refreshToken)) throw new Error('unknown refresh token');
      state.refreshes++;
      return Promise.resolve(newTokens());
    },
    verifyAccessToken(token: string): Promise<AuthInfo> {
      // The SDK answers 401 (and the client refreshes) only for its own InvalidTokenError.
      if (!valid.has(token)) return Promise.reject(new InvalidTokenError('invalid or expired token'));
      return Promise.resolve({ token, clientId: 'airlock', scopes: [], expiresAt: Math.floor(Date.now() / 1000) + 3600 });
    },
  };

  const app = express();
  const http: HttpServer = await new Promise((resolve) => {
    const s = app.listen(0, '127.0.0.1', () => resolve(s));
  });
  const base = new URL(`http://127.0.0.1:${(http.address() as AddressInfo).port}`);
  const mcpUrl = new URL('/mcp', base);
  app.use(mcpAuthRouter({ provider, issuerUrl: base, resourceServerUrl: mcpUrl }));
  app.post('/mcp', express.json(), requireBearerAuth({ verifier: provider, resourceMetadataUrl: getOAuthProtectedResourceMetadataUrl(mcpUrl) }), async (req, res) => {
    const server = new Server({ name: 'oauth-demo', version: '1.0.0' }, { capabilities: { tools: {} } });
    server.setRequestHandler(ListToolsRequestSchema, () => ({ tools: [{ name: 'whoami', description: 'Tells who you are.', inputSchema: { type: 'object', properties: {} }, annotations: { readOnlyHint: true } }] }));
    server.setRequestHandler(CallToolRequestSchema, (_r, extra) => ({ content: [{ type: 'text', text: `you sent Bearer ${extra.authInfo?.token ?? ''}` }] }));
    const transport = new StreamableHTTPServerTransport({ sessionIdGenerator: undefined });
    res.on('close', () => void transport.close());
    await server.connect(transport);
    await transport.handleRequest(req, res, req.body);
  });
  return {
    url: mcpUrl.href,
    issued,
    get refreshes() {
      return state.refreshes;
    },
    expireAccessTokens: () => valid.clear(),
    close: () =>
      new Promise<void>((resolve) => {
        http.closeAllConnections();
        http.close(() => resolve());
      }),
  };
}
