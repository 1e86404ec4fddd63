import path from 'node:path';
import { z } from 'zod';
import { AirlockError } from '../../../contracts/errors';
import { StoredFile } from '../../common/stored-file';
import { parseStoredJson } from '../../common/stored-json';
import { keyBackendOf, type KeyBackend, type KeychainAccess } from '../../keys/keychain-backend';
import { Secret } from '../../keys/secret';
import { hasOAuthTokens, McpOAuthSession, signInMcpServer } from './mcp-oauth';
import { debugLog } from '../../common/debug-log';

/**
 * The user's MCP servers the run gateway may connect to (docs/architecture.md §20). The entry (name,
 * URL, transport, how the credential is sent) is plain metadata in `<home>/mcp-servers.json`; the
 * credential's value lives only in the OS keychain (account `mcp-server:<name>`), like provider keys
 * and egress secrets, and never in a file Airlock writes.
 */

/** A server name: what `--mcp NAME` takes and what prefixes its tools in the sandbox. */
export const MCP_SERVER_NAME = /^[a-z][a-z0-9-]{0,23}$/;

/** How the credential travels to the server: `Authorization: Bearer <v>`, a named header, or OAuth tokens. */
export const McpAuthSchema = z.discriminatedUnion('type', [
  z.object({ type: z.literal('none') }).strict(),
  z.object({ type: z.literal('bearer') }).strict(),
  z.object({ type: z.literal('header'), name: z.string().min(1).max(100).regex(/^[A-Za-z0-9-]+$/) }).strict(),
  /** Signed in on the host (`airlock mcp-servers login`): tokens in the keychain, refreshed there (mcp-oauth.ts). */
  z.object({ type: z.literal('oauth') }).strict(),
]);
export type McpAuth = z.infer<typeof McpAuthSchema>;

/** A tool's rule: forwarded, put to the user first, or refused. */
export const McpToolRule = z.enum(['allow', 'ask', 'deny']);
export type McpToolRule = z.infer<typeof McpToolRule>;

/** A tool name as a server may give it (MCP: 1–128 of letters, digits, `_ . -`), or `*`: every tool without its own rule. */
export const MCP_TOOL_KEY = /^(?:\*|[A-Za-z0-9_.-]{1,128})$/;
const ToolKey = z.string().regex(MCP_TOOL_KEY);

/** An environment variable name a stdio server is given. */
export const MCP_ENV_NAME = /^[A-Za-z_][A-Za-z0-9_]{0,63}$/;

/**
 * A local (stdio) server: never run on the host, each in its own hardened sidecar container with no
 * network (docs/architecture.md §20). `package` (an npm spec) is fetched on the host with scripts off
 * and copied into the sidecar; `command` runs there with its stdin/stdout as the MCP stream.
 */
export const McpStdioSchema = z
  .object({
    /** What runs in the sidecar: the program and its arguments; for a package, the arguments of its program (npx's choice of bin). */
    command: z.array(z.string().min(1).max(4000)).max(64),
    /** The server's own image; absent: Airlock's sandbox image. */
    image: z.string().min(1).max(300).regex(/^[A-Za-z0-9][A-Za-z0-9._\/:@-]*$/).optional(),
    /** An npm package (`name@version`) fetched on the host without running its scripts. */
    package: z.string().min(1).max(214).regex(/^(?:@[a-z0-9][a-z0-9._-]*\/)?[a-z0-9][a-z0-9._-]*(?:@[A-Za-z0-9._^~<>=| -]+)?$/).optional(),
    /** Plain environment values (no secrets: those are `secretEnv`, in the keychain). */
    env: z.record(z.string().regex(MCP_ENV_NAME), z.string().max(4000)).optional(),
    /** Names of variables whose values live in the keychain (`mcp-server:<name>:env:<VAR>`). */
    secretEnv: z.array(z.string().regex(MCP_ENV_NAME)).max(32).optional(),
  })
  .strict()
  .refine((s) => s.command.length > 0 || s.package !== undefined, { message: 'name the program to run', path: ['command'] });
export type McpStdio = z.infer<typeof McpStdioSchema>;

export const McpServerEntrySchema = z
  .object({
    name: z.string().regex(MCP_SERVER_NAME),
    /** The server's endpoint: https, or http only to this machine's loopback (absent for a stdio server). */
    url: z.string().min(1).max(2000).optional(),
    /** Streamable HTTP (the current transport), the older HTTP+SSE one, or a local stdio server in a sidecar. */
    transport: z.enum(['http', 'sse', 'stdio']),
    stdio: McpStdioSchema.optional(),
    auth: McpAuthSchema,
    addedAt: z.string(),
    /** Per-tool rules the user set (`*`: the rest); a tool with none asks (the safer default, §20). */
    policy: z.record(ToolKey, McpToolRule).optional(),
    /** Each tool's description hash when the user enabled (or re-pinned) the server; a changed or new tool asks again. */
    pins: z.record(ToolKey, z.string().regex(/^[0-9a-f]{64}$/)).optional(),
    pinnedAt: z.string().optional(),
  })
  .strict();
export type McpServerEntry = z.infer<typeof McpServerEntrySchema>;

const StoreFile = z.object({ version: z.literal(1), servers: z.array(McpServerEntrySchema) }).strict();

/** What list shows: the entry and whether a credential is stored; never the value or a hint of it. */
export interface McpServerSummary extends McpServerEntry {
  hasCredential: boolean;
}

/** A server ready for a run's gateway: the entry and its credential (held as a Secret). */
export interface ResolvedMcpServer {
  entry: McpServerEntry;
  credential?: Secret<string>;
  /** For `auth: oauth`: the signed-in session the SDK sends and refreshes the tokens through. */
  oauth?: McpOAuthSession;
  /** A stdio server's secret environment values (from the keychain). */
  secretEnv?: Record<string, Secret<string>>;
}

/** Where a server is, for records and lists: the URL's origin, or `stdio:` and its image. */
export function serverOrigin(entry: McpServerEntry): string {
  if (entry.transport === 'stdio') return `stdio:${entry.stdio?.image ?? 'airlock'}`;
  return entry.url ? new URL(entry.url).origin : '(no url)';
}

/** Checks a server URL: https anywhere, plain http only to loopback (a local server). */
export function checkServerUrl(text: string): URL {
  let url: URL;
  try {
    url = new URL(text);
  } catch {
    throw new AirlockError('INVALID_INPUT', `"${text.slice(0, 200)}" is not a URL; give the server's endpoint, e.g. https://mcp.example.com/mcp`, { field: 'url' });
  }
  const loopback = ['127.0.0.1', 'localhost', '[::1]'].includes(url.hostname);
  if (url.protocol !== 'https:' && !(url.protocol === 'http:' && loopback)) {
    throw new AirlockError('INVALID_INPUT', `the server URL must be https (plain http only to this machine's loopback); got ${url.protocol}//${url.host}`, { field: 'url' });
  }
  if (url.username || url.password) throw new AirlockError('INVALID_INPUT', 'put the credential in the keychain (--auth bearer, value on stdin), not in the URL', { field: 'url' });
  return url;
}

export class McpServerRegistry {
  readonly file: string;
  private readonly backend: KeyBackend;
  private readonly stored: StoredFile<z.infer<typeof StoreFile>>;

  constructor(opts: { home: string } & KeychainAccess) {
    this.file = path.join(opts.home, 'mcp-servers.json');
    this.stored = new StoredFile<z.infer<typeof StoreFile>>(this.file, { parse: (file, text) => parseStoredJson(StoreFile, file, text, 'fix or remove it (it holds no credentials; those stay in the keychain).'), empty: () => ({ version: 1, servers: [] }) });
    this.backend = keyBackendOf(opts);
  }

  /** Adds (or replaces, dropping its rules and pins: it may be another server now) a server; the credential goes to the keychain only. */
  async add(input: { name: string; url: string; transport?: 'http' | 'sse'; auth: McpAuth }, credential?: string): Promise<McpServerEntry> {
    if (!MCP_SERVER_NAME.test(input.name)) throw new AirlockError('INVALID_INPUT', 'a server name is lower-case letters, digits and - (up to 24), starting with a letter', { field: 'name' });
    const url = checkServerUrl(input.url);
    await this.dropSecretEnv(input.name);
    const auth = McpAuthSchema.parse(input.auth);
    const value = credential?.replace(/\r?\n$/, '');
    if (auth.type !== 'none' && auth.type !== 'oauth' && (!value || value.length < 4 || value.length > 16_384 || /[\r\n\0]/.test(value))) {
      throw new AirlockError('INVALID_INPUT', 'the credential must be one line of 4 to 16384 characters (pipe it on stdin)');
    }
    const entry: McpServerEntry = { name: input.name, url: url.href, transport: input.transport ?? 'http', auth, addedAt: new Date().toISOString() };
    return this.change(async (all) => {
      if (auth.type !== 'none' && auth.type !== 'oauth') {
        await this.backend.probe();
        await this.backend.set(account(entry.name), value as string);
      } else await this.backend.delete(account(entry.name)).catch(debugLog.swallow('mcpServers.deleteSecret'));
      return { list: [...all.filter((s) => s.name !== entry.name), entry], result: entry };
    });
  }

  /**
   * Adds (or replaces) a local stdio server, run in a sidecar (§20). Secret environment values go to
   * the keychain only (one account per variable); the file holds their names.
   */
  async addStdio(input: { name: string; stdio: McpStdio }, secrets: Record<string, string> = {}): Promise<McpServerEntry> {
    if (!MCP_SERVER_NAME.test(input.name)) throw new AirlockError('INVALID_INPUT', 'a server name is lower-case letters, digits and - (up to 24), starting with a letter', { field: 'name' });
    const parsed = McpStdioSchema.safeParse({ ...input.stdio, ...(Object.keys(secrets).length ? { secretEnv: Object.keys(secrets) } : {}) });
    if (!parsed.success) throw new AirlockError('INVALID_INPUT', `the stdio server "${input.name}" is not valid: ${parsed.error.issues.map((i) => `${i.path.join('.')}: ${i.message}`).join('; ').slice(0, 400)}`, { field: 'stdio' });
    for (const [k, v] of Object.entries(secrets)) {
      if (!v || v.length > 16_384 || /[\r\n\0]/.test(v)) throw new AirlockError('INVALID_INPUT', `the secret value of ${k} must be one line of up to 16384 characters`, { field: 'secretEnv' });
      if (parsed.data.env?.[k] !== undefined) throw new AirlockError('INVALID_INPUT', `${k} is given both as a plain and as a secret value; keep one`, { field: 'secretEnv' });
    }
    const entry: McpServerEntry = { name: input.name, transport: 'stdio', stdio: parsed.data, auth: { type: 'none' }, addedAt: new Date().toISOString() };
    return this.change(async (all) => {
      await this.dropSecretEnv(input.name);
      if (Object.keys(secrets).length) await this.backend.probe();
      for (const [k, v] of Object.entries(secrets)) await this.backend.set(envAccount(input.name, k), v);
      await this.backend.delete(account(entry.name)).catch(debugLog.swallow('mcpServers.deleteSecret'));
      return { list: [...all.filter((s) => s.name !== entry.name), entry], result: entry };
    });
  }

  /** Deletes the keychain values of a stdio entry's secret variables (when it is replaced or removed). */
  private async dropSecretEnv(name: string): Promise<void> {
    const old = (await this.read()).find((s) => s.name === name);
    for (const k of old?.stdio?.secretEnv ?? []) await this.backend.delete(envAccount(name, k)).catch(debugLog.swallow('mcpServers.deleteSecretEnv'));
  }

  /** Sets one tool's rule (`*`: every tool without its own); `undefined` removes it (the tool asks again). */
  async setPolicy(name: string, tool: string, rule: McpToolRule | undefined): Promise<McpServerEntry> {
    if (!MCP_TOOL_KEY.test(tool)) throw new AirlockError('INVALID_INPUT', `"${tool.slice(0, 60)}" is not a tool name (letters, digits, _ . - up to 128) or * (every tool without its own rule)`, { field: 'tool' });
    return this.update(name, (e) => {
      const policy = { ...(e.policy ?? {}) };
      if (rule) policy[tool] = rule;
      else delete policy[tool];
      const { policy: _old, ...rest } = e;
      return Object.keys(policy).length ? { ...rest, policy } : rest;
    });
  }

  /** Records the tools' description hashes the user has now seen: later changes ask again. */
  async pin(name: string, tools: ReadonlyArray<{ tool: string; descriptionHash: string }>): Promise<McpServerEntry> {
    const pins: Record<string, string> = {};
    for (const t of tools) if (MCP_TOOL_KEY.test(t.tool) && t.tool !== '*') pins[t.tool] = t.descriptionHash;
    return this.update(name, (e) => ({ ...e, pins, pinnedAt: new Date().toISOString() }));
  }

  /** One entry by name, or undefined. */
  async get(name: string): Promise<McpServerEntry | undefined> {
    return (await this.read()).find((s) => s.name === name);
  }

  async list(): Promise<McpServerSummary[]> {
    const all = await this.read();
    return Promise.all(
      all.map(async (s) => {
        if (s.auth.type === 'none') return { ...s, hasCredential: false };
        const value = await this.backend.get(account(s.name)).catch(debugLog.swallow('mcpServers.list.credential'));
        return { ...s, hasCredential: s.auth.type === 'oauth' ? hasOAuthTokens(value) : value !== undefined };
      }),
    );
  }

  /** Removes the entry and its credential; false when there was neither. */
  async remove(name: string): Promise<boolean> {
    return this.change(async (all) => {
      const had = all.some((s) => s.name === name);
      await this.dropSecretEnv(name);
      const deleted = await this.backend.delete(account(name)).catch((err: unknown) => {
        debugLog.note('mcpServers.remove.secret', err);
        return false;
      });
      return { list: had ? all.filter((s) => s.name !== name) : all, result: had || deleted };
    });
  }

  /** The entries and credentials for a run's chosen servers; an unknown name or a missing credential is an error. */
  async resolve(names: readonly string[]): Promise<ResolvedMcpServer[]> {
    const all = await this.read();
    const out: ResolvedMcpServer[] = [];
    for (const name of [...new Set(names)]) {
      const entry = all.find((s) => s.name === name);
      if (!entry) throw new AirlockError('NOT_FOUND', `no MCP server named "${name}"; add it with \`airlock mcp-servers add ${name} --url URL --auth bearer\` (the token on stdin)`, { field: 'mcpServers' });
      if (entry.transport === 'stdio') {
        const secretEnv: Record<string, Secret<string>> = {};
        for (const k of entry.stdio?.secretEnv ?? []) {
          const v = await this.backend.get(envAccount(name, k));
          if (v === undefined) throw new AirlockError('NOT_FOUND', `the secret ${k} of MCP server "${name}" is missing from the keychain; add the server again (\`airlock mcp-servers add ${name} --stdio --secret-env ${k} -- …\`)`, { field: 'mcpServers' });
          secretEnv[k] = new Secret(v);
        }
        out.push({ entry, ...(Object.keys(secretEnv).length ? { secretEnv } : {}) });
        continue;
      }
      if (entry.auth.type === 'none') {
        out.push({ entry });
        continue;
      }
      if (entry.auth.type === 'oauth') {
        const oauth = await McpOAuthSession.load(this.backend, account(name), name);
        if (!oauth) throw new AirlockError('NOT_FOUND', `MCP server "${name}" is not signed in; sign in with \`airlock mcp-servers login ${name}\``, { field: 'mcpServers' });
        out.push({ entry, oauth });
        continue;
      }
      const value = await this.backend.get(account(name));
      if (value === undefined) throw new AirlockError('NOT_FOUND', `the credential of MCP server "${name}" is missing from the keychain; add the server again (\`airlock mcp-servers add ${name} …\`)`, { field: 'mcpServers' });
      out.push({ entry, credential: new Secret(value) });
    }
    return out;
  }

  /**
   * Signs in to an OAuth server (`auth: oauth`): `open` shows the user the server's sign-in page; the
   * tokens replace the stored ones only once the sign-in succeeded (mcp-oauth.ts).
   */
  async login(name: string, open: (url: URL) => void | Promise<void>, opts: { signal?: AbortSignal; timeoutMs?: number } = {}): Promise<void> {
    const entry = await this.get(name);
    if (!entry) throw new AirlockError('NOT_FOUND', `no MCP server named "${name.slice(0, 40)}" (see \`airlock mcp-servers list\`)`, { field: 'name' });
    if (entry.auth.type !== 'oauth' || !entry.url) throw new AirlockError('INVALID_INPUT', `MCP server "${name}" uses ${entry.auth.type === 'none' ? 'no credential' : 'a stored token'}, not OAuth; add it again with --auth oauth to sign in`, { field: 'name' });
    await signInMcpServer({ backend: this.backend, account: account(name), name, serverUrl: entry.url, open, ...opts });
  }

  private update(name: string, change: (e: McpServerEntry) => McpServerEntry): Promise<McpServerEntry> {
    return this.change(async (all) => {
      const at = all.findIndex((s) => s.name === name);
      if (at < 0) throw new AirlockError('NOT_FOUND', `no MCP server named "${name.slice(0, 40)}" (see \`airlock mcp-servers list\`)`, { field: 'name' });
      const next = McpServerEntrySchema.parse(change(all[at] as McpServerEntry));
      return { list: all.map((s, i) => (i === at ? next : s)), result: next };
    });
  }

  private async read(): Promise<McpServerEntry[]> {
    return (await this.stored.read()).servers;
  }

  /** One update of the file (serialised with every other, in this process and others): `op` returns the list to store and its result. */
  private async change<R>(op: (all: McpServerEntry[]) => Promise<{ list: McpServerEntry[]; result: R }>): Promise<R> {
    let result: { value: R } | undefined;
    await this.stored.update(async (file) => {
      const out = await op(file.servers);
      result = { value: out.result };
      return out.list === file.servers ? file : { version: 1, servers: out.list };
    });
    return (result as { value: R }).value;
  }

}

function account(name: string): string {
  return `mcp-server:${name}`;
}

function envAccount(name: string, variable: string): string {
  return `mcp-server:${name}:env:${variable}`;
}
