import { AsyncEntry } from '@napi-rs/keyring';
import { randomBytes } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { describeError } from '../../contracts/error-help';
import { AirlockError } from '../../contracts/errors';
import type { RunEvent, StartRunInput } from '../../contracts/runs';
import { CODEX_OAUTH_CLIENT_ID } from '../../core/keys/chatgpt-session';
import type { ScriptedTurn } from '../fixtures/fake-upstream';
import { requirePrerequisite } from '../support/prerequisites';
import { createRunFixture, filesContaining, leftoversOf, type RunFixture } from '../support/run-fixture';
import { enc, SEARCH_SCRIPT } from '../support/sandbox-search';

/**
 * Subscription sign-in end to end (docs/architecture.md §6): the unchanged Claude Code and Codex CLIs
 * run in a hardened `--network none` sandbox with only a run token where their credential goes
 * (CLAUDE_CODE_OAUTH_TOKEN; a placeholder auth.json), the fake upstream checks that the real
 * credential arrived in the vendor's exact header shape, an expiring ChatGPT sign-in is refreshed
 * exactly once by the proxy (the new tokens used and stored in the keychain), and a search inside the
 * live sandbox — run by the CLI itself — finds no credential in any process environment, command
 * line or file. The run records, terminal log and events hold none either. The built-in agent asked
 * to use a subscription is refused before the run starts.
 */

const docker = await requirePrerequisite('docker');
const keychain = docker.ok ? await requirePrerequisite('keychain') : docker;

const part = (o: unknown) => Buffer.from(JSON.stringify(o)).toString('base64url');
const jwt = (payload: Record<string, unknown>) => `${part({ alg: 'RS256', typ: 'JWT' })}.${part(payload)}.${randomBytes(24).toString('base64url')}`;
const canary = (label: string) => `${label}-${randomBytes(20).toString('hex')}-CANARY`;

interface SearchResult {
  hits: string[];
  control: { environ: boolean; file: boolean };
  files: number;
  environs: number;
  mounts: string[];
}

describe.skipIf(!docker.ok || !keychain.ok)('subscription credentials with the real CLIs (Docker, keychain, fake upstream)', () => {
  let f: RunFixture;
  beforeAll(async () => {
    f = await createRunFixture();
    await f.core.catalog.setBaseUrl('claude-subscription', f.upstream.url);
    await f.core.catalog.setBaseUrl('chatgpt-signin', `${f.upstream.url}/backend-api/codex`);
    await f.core.catalog.setAuthBaseUrl('chatgpt-signin', f.upstream.url);
    await f.core.image('agents');
  });
  afterAll(async () => {
    await f?.core.vault.remove('claude-subscription').catch(() => undefined);
    await f?.core.vault.remove('chatgpt-signin').catch(() => undefined);
    await f?.close();
  });

  async function eventsOf(runId: string): Promise<RunEvent['event'][]> {
    const out: RunEvent['event'][] = [];
    for await (const e of f.core.store.readEvents<RunEvent>(runId)) out.push(e.event);
    return out;
  }

  /** A command the CLI runs in the sandbox: writes the result file, then searches for the credentials. */
  function searchCommand(marker: string, envControl: string, fileControl: string, secrets: string[]): string {
    return `echo ${marker} > out.txt && node -e "$(cat search.cjs)" ${[envControl, fileControl, ...secrets].map(enc).join(' ')}`;
  }

  async function runWithSearch(input: Partial<StartRunInput> & { script: ScriptedTurn[] }, marker: string, secrets: string[]) {
    const projectDir = await f.project({ 'README.md': '# demo\n', 'search.cjs': `${SEARCH_SCRIPT}\n`, 'control.txt': 'file-control-5a17\n' });
    const started = await f.start({ projectDir, task: 'Create out.txt with a greeting.', ...input });
    const run = await f.core.runs.wait(started.id);
    const events = await eventsOf(run.id);
    const diagnostics = JSON.stringify({ status: run.status, error: run.error, events: events.slice(-12) }).slice(0, 4000);
    expect(run.status, diagnostics).toBe('done');
    expect(run.changedFiles.map((c) => `${c.status} ${c.path}`)).toContain('added out.txt');
    const terminal = await f.terminalLog(run.id);
    const line = terminal.split(/\r?\n/).find((l) => l.includes('"control"'));
    expect(line, terminal.slice(-3000)).toBeDefined();
    const inside = JSON.parse(line!.slice(line!.indexOf('{'))) as SearchResult;
    console.log(`[subscription canary] ${input.agent}: ${inside.files} files, ${inside.environs} environs on ${inside.mounts.join(' ')}`);
    expect(inside.control).toEqual({ environ: true, file: true });
    expect(inside.files).toBeGreaterThan(0);
    expect(inside.hits).toEqual([]);

    // Nothing Airlock kept holds a credential: run record, events, terminal log, audit log, artifacts.
    for (const s of secrets) {
      expect(await filesContaining(f.core.store.paths(run.id).dir, s)).toEqual([]);
      expect(JSON.stringify(events)).not.toContain(s);
      expect(JSON.stringify(await f.core.vault.list())).not.toContain(s);
    }
    expect((await f.services.audit.verify({ runId: run.id })).intact).toBe(true);
    expect(await leftoversOf(run.id)).toEqual([]);
    const audit = await readFile(f.core.store.paths(run.id).audit, 'utf8');
    expect(audit).toContain(`subscription credential '${input.provider}'`);
    return { run, audit };
  }

  it('Claude Code with a stored setup token: the upstream gets Bearer <token> + the OAuth beta; the sandbox only the run token', async () => {
    const token = `sk-ant-oat01-${canary('claude')}`;
    await f.core.vault.setClaudeSubscription(token, { storage: 'keychain' });
    f.upstream.setExpectedKey(token);
    f.upstream.requests.length = 0;
    const marker = 'hello-from-claude-subscription';
    const { run } = await runWithSearch(
      {
        agent: 'claude-code',
        provider: 'claude-subscription',
        model: 'claude-sonnet-4-5',
        script: [
          { toolCalls: [{ name: 'Bash', input: { command: searchCommand(marker, 'CLAUDE_CODE_OAUTH_TOKEN=airlock-run-', 'file-control-5a17', [token]), description: 'write and check' } }] },
          { text: 'All done here.' },
        ],
      },
      marker,
      [token],
    );
    expect(run.usage.requests).toBeGreaterThanOrEqual(2);
    const calls = f.upstream.requests.filter((r) => r.method === 'POST' && r.path === '/v1/messages');
    expect(calls.length).toBeGreaterThanOrEqual(2);
    for (const r of calls) {
      expect(r.headers.authorization).toBe(`Bearer ${token}`);
      expect(r.headers['x-api-key']).toBeUndefined();
      expect(String(r.headers['anthropic-beta']).split(',')).toContain('oauth-2025-04-20');
    }
  });

  it('Codex with an imported ChatGPT sign-in about to expire: refreshed once by the proxy, the new token used upstream and stored in the keychain', async () => {
    const old = { access: jwt({ exp: Math.floor(Date.now() / 1000) + 60 }), refresh: canary('rt'), id: jwt({ email: 'dev@example.invalid', 'https://api.openai.com/auth': { chatgpt_plan_type: 'plus', chatgpt_account_id: 'acct-sub-9' } }) };
    const next = { access_token: jwt({ exp: Math.floor(Date.now() / 1000) + 864_000 }), refresh_token: canary('rt2'), id_token: jwt({ 'https://api.openai.com/auth': { chatgpt_plan_type: 'plus', chatgpt_account_id: 'acct-sub-9' } }) };
    await f.core.vault.importChatgptSignin(JSON.stringify({ OPENAI_API_KEY: null, tokens: { id_token: old.id, access_token: old.access, refresh_token: old.refresh, account_id: 'acct-sub-9' }, last_refresh: new Date().toISOString() }), { storage: 'keychain' });
    f.upstream.setAuth({ clientId: CODEX_OAUTH_CLIENT_ID, refreshToken: old.refresh, next });
    f.upstream.setExpectedKey(next.access_token);
    f.upstream.requests.length = 0;
    const secrets = [old.access, old.refresh, old.id, next.access_token, next.refresh_token, next.id_token];
    const marker = 'hello-from-codex-signin';
    const { audit } = await runWithSearch(
      {
        agent: 'codex',
        provider: 'chatgpt-signin',
        model: 'gpt-5',
        script: [
          // The file control is the refresh placeholder in the generated auth.json: the search read it.
          { toolCalls: [{ name: 'exec_command', input: { cmd: searchCommand(marker, 'CODEX_REFRESH_TOKEN_URL_OVERRIDE=http://127.0.0.1:', '"refresh_token":"airlock-refresh-', secrets) } }] },
          { text: 'All done here.' },
        ],
      },
      marker,
      secrets,
    );
    // One refresh, one audit record (however many calls waited for it).
    expect(audit.split('the proxy refreshed the chatgpt-signin sign-in (its access token was about to expire)')).toHaveLength(2);
    // Exactly one refresh, by the proxy, with the real refresh token; never one from the sandbox.
    const refreshes = f.upstream.requests.filter((r) => r.path === '/oauth/token');
    expect(refreshes).toHaveLength(1);
    expect(refreshes[0]!.body).toMatchObject({ client_id: CODEX_OAUTH_CLIENT_ID, grant_type: 'refresh_token', refresh_token: old.refresh });
    const calls = f.upstream.requests.filter((r) => r.method === 'POST' && r.url === '/backend-api/codex/responses');
    expect(calls.length).toBeGreaterThanOrEqual(2);
    for (const r of f.upstream.requests.filter((q) => q.path !== '/oauth/token')) {
      expect(r.headers.authorization).toBe(`Bearer ${next.access_token}`);
      expect(r.headers['chatgpt-account-id']).toBe('acct-sub-9');
    }
    const stored = JSON.parse((await new AsyncEntry(f.core.env.AIRLOCK_KEYCHAIN_SERVICE!, 'chatgpt-signin').getPassword()) ?? '{}') as Record<string, unknown>;
    expect(stored).toMatchObject({ accessToken: next.access_token, refreshToken: next.refresh_token, accountId: 'acct-sub-9' });
  });

  it('the built-in agent (or a custom command) asked to use a subscription is refused before the run starts', async () => {
    const projectDir = await f.project();
    const before = (await f.core.store.list()).runs.length;
    for (const [agent, provider, client] of [['builtin', 'claude-subscription', 'Claude Code'], ['custom', 'chatgpt-signin', 'Codex CLI']] as const) {
      const err = await f.start({ projectDir, agent, provider, model: 'm', ...(agent === 'custom' ? { customCommand: 'true' } : {}), script: [] }).then(
        () => undefined,
        (e: unknown) => e,
      );
      expect(err).toBeInstanceOf(AirlockError);
      const info = (err as AirlockError).toInfo();
      expect(info).toMatchObject({ kind: 'FORBIDDEN', field: 'provider' });
      expect(info.message).toContain(`serves only ${client}`);
      expect(describeError(info).title).toBe('Not allowed');
    }
    // Through the contract (what the UI calls), the same refusal as an envelope-ready error.
    await expect(f.services.runs.start({ projectDir, task: 't', agent: 'builtin', provider: 'claude-subscription', model: 'm' } as Parameters<typeof f.services.runs.start>[0])).rejects.toMatchObject({ kind: 'FORBIDDEN' });
    expect((await f.core.store.list()).runs.length).toBe(before);
  });
});
