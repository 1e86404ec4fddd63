import { randomBytes } from 'node:crypto';
import { mkdtemp, readdir, readFile, rm, stat } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { AttemptGroup } from '../../contracts/attempts';
import { newAttemptGroupId, newRunId } from '../../contracts/ids';
import { BuildRecords } from '../../core/environment/build-records';
import { PreparedUsage } from '../../core/environment/prepared-environments';
import { SecretStore } from '../../core/network/gateway/secret-store';
import { McpServerRegistry } from '../../core/network/mcp-gateway/mcp-server-registry';
import { ProjectNetworkStore } from '../../core/network/project-network-store';
import { AttemptGroupStore } from '../../core/runs/attempt-group-store';
import { ConsentRequests } from '../../core/runs/consent-requests';
import { RunStore } from '../../core/runs/run-store';
import { z } from 'zod';
import { testGit } from '../support/workspace-fixtures';

/**
 * Every store of a file that is read, changed and written back is one StoredFile (docs/architecture.md
 * §5, "Stored files"): two of its objects (the app's and a CLI's, or two made per run) updating at
 * once lose neither update. Before, each kept its own in-process queue (or none), so the second
 * writer wrote back what it had read before the first one's change.
 */
let home: string;
beforeEach(async () => {
  home = await mkdtemp(path.join(os.tmpdir(), 'airlock-store-updates-'));
});
afterEach(async () => {
  await rm(home, { recursive: true, force: true });
});

/** Ten updates split over two objects of one store, all started at once. */
function both<S>(make: () => S, update: (s: S, i: number) => Promise<unknown>): Promise<unknown[]> {
  const [a, b] = [make(), make()];
  return Promise.all(Array.from({ length: 10 }, (_, i) => update(i % 2 ? a : b, i)));
}

describe('two updates of one stored file at once: neither lost', () => {
  it("a project's network.json", async () => {
    const project = path.join(home, 'project');
    await both(() => new ProjectNetworkStore(project, home), (s, i) => s.add(`h${i}.example.test`));
    const stored = new ProjectNetworkStore(project, home);
    expect((await stored.load()).map((e) => e.host).sort()).toEqual(Array.from({ length: 10 }, (_, i) => `h${i}.example.test`).sort());
    expect((await stat(stored.file)).mode & 0o777).toBe(0o600);
    expect(await readdir(path.dirname(stored.file))).toEqual(['network.json']);
  });

  it('prepared-environments.json (last use)', async () => {
    await both(() => new PreparedUsage(home), (s, i) => s.touch(`key${i}`));
    expect(Object.keys(await new PreparedUsage(home).read())).toHaveLength(10);
  });

  it('environment-builds.json (build records)', async () => {
    await both(() => new BuildRecords(home), (s, i) => s.remember(`key${i}`, `sha256:${i}`));
    const text = JSON.parse(await readFile(path.join(home, 'environment-builds.json'), 'utf8')) as { builds: Record<string, unknown> };
    expect(Object.keys(text.builds)).toHaveLength(10);
  });

  it("a run's run.json (two stores of one home)", async () => {
    const id = newRunId();
    const at = new Date().toISOString();
    const first = new RunStore({ git: testGit, home });
    await first.create({ id, kind: 'agent', task: 't', projectDir: '/p', agent: 'builtin', provider: 'anthropic', model: 'm', status: 'queued', createdAt: at, updatedAt: at, isolation: 'container', network: 'none', sandbox: { driver: 'docker' } });
    await both(() => new RunStore({ git: testGit, home }), (s, i) => s.update(id, (r) => ({ ...r, task: `${r.task}+${i}` })));
    const task = (await first.get(id)).task;
    expect(task.split('+').slice(1).map(Number).sort((x, y) => x - y)).toEqual([0, 1, 2, 3, 4, 5, 6, 7, 8, 9]);
    // The previous version stays beside it; no temporary file or lock is left.
    expect((await readdir(first.paths(id).dir)).sort()).toEqual(['run.json', 'run.json.bak']);
    await first.close();
  });

  it('an attempt group', async () => {
    const runs = Array.from({ length: 10 }, () => newRunId());
    const group: AttemptGroup = { id: newAttemptGroupId(), createdAt: 'now', projectDir: '/p', task: 't', concurrency: 1, attempts: [] };
    await new AttemptGroupStore(home).create(group);
    await both(
      () => new AttemptGroupStore(home),
      (s, i) => s.update(group.id, (g) => ({ ...g, attempts: [...g.attempts, { index: i, runId: runs[i] as string, agent: 'builtin', provider: 'anthropic', model: 'm' }] })),
    );
    expect((await new AttemptGroupStore(home).get(group.id)).attempts.map((a) => a.index).sort((x, y) => x - y)).toEqual([0, 1, 2, 3, 4, 5, 6, 7, 8, 9]);
  });

  it('egress-secrets.json (bindings; values stay in the keychain)', async () => {
    const service = `airlock-test-store-updates-${randomBytes(4).toString('hex')}`;
    await both(
      () => new SecretStore({ home, service }),
      (s, i) => s.setCommand({ name: `s${i}`, hosts: ['api.example.test'], forms: [{ type: 'bearer' }], command: { argv: ['true'] } }),
    );
    expect((await new SecretStore({ home, service }).list()).map((s) => s.name).sort()).toEqual(Array.from({ length: 10 }, (_, i) => `s${i}`).sort());
  });

  it('mcp-servers.json', async () => {
    const service = `airlock-test-store-updates-${randomBytes(4).toString('hex')}`;
    await both(() => new McpServerRegistry({ home, service }), (s, i) => s.add({ name: `srv${String.fromCharCode(97 + i)}`, url: `http://127.0.0.1:${4000 + i}/mcp`, auth: { type: 'none' } }));
    expect((await new McpServerRegistry({ home, service }).list()).map((s) => s.name)).toHaveLength(10);
  });

  it('a consent answer: of two answers at once, exactly one is taken', async () => {
    const Req = z.object({ requestId: z.string(), requestedAt: z.string(), expiresAt: z.string(), what: z.string() });
    const asker = new ConsentRequests(home, 'test', Req, 'test.consent');
    const req = await asker.request({ what: 'x' }, 60_000);
    const answers = await Promise.all([true, false, true, false].map((yes) => new ConsentRequests(home, 'test', Req, 'test.consent').answer(req.requestId, yes)));
    expect(answers.filter(Boolean)).toHaveLength(1);
  });
});
