/**
 * docs/architecture.md §16, "Prepared environments": after a successful setup the state it left is
 * kept (before the agent, before the run token) as an image keyed by setup's inputs; the next run on
 * the same inputs starts from it without running setup, a changed lockfile prepares again, nothing of
 * the agent, the run token or the key is in it, and `env list` / `env prune` see and remove it.
 * Real engine, real proxy and keychain session, the scripted fake upstream.
 */
import { spawn } from 'node:child_process';
import { Writable } from 'node:stream';
import { writeFile } from 'node:fs/promises';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { StartRunInput } from '../../contracts/runs';
import { envCommand } from '../../core/cli/commands/env';
import { listPrepared, PreparedUsage, prunePrepared } from '../../core/environment/prepared-environments';
import { connectEngine } from '../../core/sandbox/docker/engine';
import type { ScriptedTurn } from '../fixtures/fake-upstream';
import { requirePrerequisite } from '../support/prerequisites';
import { CANARY_KEY, createRunFixture, leftoversOf, type RunFixture } from '../support/run-fixture';

const docker = await requirePrerequisite('docker');

/** Setup's side effect: a fresh random line each time it runs, in the home and in a folder the review never shows. */
const SETUP = 'cat /proc/sys/kernel/random/uuid >> "$HOME/setup-log"; mkdir -p node_modules/dep && cp "$HOME/setup-log" node_modules/dep/stamp; echo generated > setup-made.txt';
const AGENT_MARK = 'agent-phase-canary-4f19d2';

function script(command: string): ScriptedTurn[] {
  return [{ toolCalls: [{ name: 'run_command', input: { command } }] }, { toolCalls: [{ name: 'finish', input: { summary: 'done' } }] }];
}

/** Every byte of an image as the engine exports it (layers, config with env and labels). */
function savedImage(ref: string): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const child = spawn('docker', ['save', ref], { stdio: ['ignore', 'pipe', 'pipe'] });
    const out: Buffer[] = [];
    child.stdout.on('data', (c: Buffer) => out.push(c));
    child.on('error', reject);
    child.on('exit', (code) => (code === 0 ? resolve(Buffer.concat(out)) : reject(new Error(`docker save ${ref} exited ${code}`))));
  });
}

describe.skipIf(!docker.ok)('prepared environments (real Docker, fake upstream)', () => {
  let f: RunFixture;
  let airlockImage: string;
  const tokens: string[] = [];
  const made: string[] = [];

  beforeAll(async () => {
    f = await createRunFixture();
    airlockImage = await f.core.image('base');
    // The run tokens the proxy issues, to look for them where they must not be.
    const issue = f.core.proxy.issueToken.bind(f.core.proxy);
    f.core.proxy.issueToken = (o) => {
      const grant = issue(o);
      tokens.push(grant.token);
      return grant;
    };
  });
  afterAll(async () => {
    const engine = await connectEngine(process.env).catch(() => undefined);
    for (const ref of made) await engine?.docker.getImage(ref).remove({ force: true }).catch(() => undefined);
    await f?.close();
  });

  async function run(projectDir: string, command: string) {
    f.upstream.setScript(script(command));
    const started = await f.services.runs.start(StartRunInput.parse({ projectDir, task: 't', provider: 'anthropic', model: 'claude-sonnet-4-5', trustEnvironment: true }));
    const done = await f.core.runs.wait(started.id);
    expect(done.error).toBeUndefined();
    expect(done.status).toBe('done');
    return done;
  }
  async function cli(args: string[]): Promise<{ code: number; out: string }> {
    let out = '';
    const sink = new Writable({ write: (c: Buffer, _e, cb) => ((out += c.toString()), cb()) });
    const code = await envCommand.run(args, { stdout: sink, stderr: sink, stdin: process.stdin, env: f.core.env, app: f.core.app });
    return { code, out };
  }
  const lastToolOutput = () => JSON.stringify(f.upstream.requests.at(-1)?.body ?? {});

  it('the second run on the same inputs skips setup; a changed lockfile prepares again; nothing of the agent, the token or the key is kept', async () => {
    const projectDir = await f.project({
      'package.json': '{ "name": "p", "version": "1.0.0" }\n',
      'package-lock.json': '{ "name": "p", "lockfileVersion": 3, "packages": {} }\n',
      'src.txt': 'v1\n',
      '.devcontainer/devcontainer.json': JSON.stringify({ image: airlockImage, postCreateCommand: SETUP }),
    });
    const show = `echo "log=[$(cat $HOME/setup-log | tr '\\n' ' ')]"; echo "stamp=[$(cat node_modules/dep/stamp | tr '\\n' ' ')]"; cat src.txt; echo ${AGENT_MARK} > agent.txt; echo ${AGENT_MARK} >> $HOME/setup-log`;

    const first = await run(projectDir, show);
    expect(first.environment?.prepared?.status).toBe('created');
    const ref = first.environment?.prepared?.image ?? '';
    made.push(ref);
    const log1 = /log=\[([0-9a-f-]+) \]/.exec(lastToolOutput())?.[1];
    expect(log1).toMatch(/^[0-9a-f-]{36}$/);
    expect((await f.terminalLog(first.id))).toContain('[setup] postCreateCommand');
    expect(first.changedFiles.map((c) => `${c.status} ${c.path}`)).toEqual(['added agent.txt']);

    // The project changes (not an input): the second run starts from the prepared state over the new copy.
    await writeFile(path.join(projectDir, 'src.txt'), 'v2\n');
    const second = await run(projectDir, show);
    expect(second.environment?.prepared).toEqual({ status: 'reused', key: first.environment?.prepared?.key, image: ref });
    expect(second.sandbox.image).toBe(ref);
    const out2 = lastToolOutput();
    // One line, the first run's: setup did not run again, and the agent's line of the first run is not there.
    expect(out2).toContain(`log=[${log1} ]`);
    expect(out2).toContain(`stamp=[${log1} ]`);
    expect(out2).toContain('v2');
    const terminal2 = await f.terminalLog(second.id);
    expect(terminal2).not.toContain('[setup] postCreateCommand');
    expect(terminal2).toContain('starting from the prepared environment');
    // Review and apply still show only the agent's work: setup's files are the baseline.
    expect(second.changedFiles.map((c) => `${c.status} ${c.path}`)).toEqual(['added agent.txt']);
    const audit2 = await import('node:fs/promises').then((fs) => fs.readFile(f.core.store.paths(second.id).audit, 'utf8'));
    expect(audit2).toContain(`setup skipped: started from the prepared environment ${ref}`);
    // Setup's files are in the image (counted by the host at commit), so they are put back and collected as the baseline.
    expect(Number((await (await connectEngine(process.env)).docker.getImage(ref).inspect()).Config.Labels['airlock.prepared.workspace-entries'])).toBeGreaterThan(0);
    expect(audit2).toContain('setup finished; it changed');

    // The canaries: the prepared image holds setup's state and nothing of any agent phase, no token, no key.
    const bytes = await savedImage(ref);
    expect(bytes.includes(Buffer.from(log1 ?? 'x'))).toBe(true);
    expect(tokens.length).toBeGreaterThanOrEqual(2);
    for (const t of tokens) expect(bytes.includes(Buffer.from(t))).toBe(false);
    expect(bytes.includes(Buffer.from(CANARY_KEY))).toBe(false);
    expect(bytes.includes(Buffer.from(AGENT_MARK))).toBe(false);

    // A changed lockfile is a changed input: setup runs again and a new prepared environment is kept.
    await writeFile(path.join(projectDir, 'package-lock.json'), '{ "name": "p", "lockfileVersion": 3, "packages": { "": {} } }\n');
    const third = await run(projectDir, show);
    expect(third.environment?.prepared?.status).toBe('created');
    expect(third.environment?.prepared?.key).not.toBe(first.environment?.prepared?.key);
    made.push(third.environment?.prepared?.image ?? '');
    expect(await f.terminalLog(third.id)).toContain('[setup] postCreateCommand');
    const log3 = /log=\[([0-9a-f-]+) \]/.exec(lastToolOutput())?.[1];
    expect(log3).toMatch(/^[0-9a-f-]{36}$/);
    expect(log3).not.toBe(log1);
    for (const r of [first, second, third]) expect(await leftoversOf(r.id)).toEqual([]);

    // `env list` sees both with their inputs; `env prune --older-than` keeps recent ones; prune removes them.
    const engine = await connectEngine(process.env);
    const usage = new PreparedUsage(f.home);
    const listed = (await listPrepared(engine.docker, usage, await f.core.app.installationId())).filter((p) => p.project === path.resolve(projectDir));
    expect(listed.map((p) => p.key).sort()).toEqual([first.environment?.prepared?.key, third.environment?.prepared?.key].sort());
    for (const p of listed) {
      expect(p.config).toBe('.devcontainer/devcontainer.json');
      expect(p.files).toEqual(['package.json', 'package-lock.json']);
      expect(p.sizeBytes).toBeGreaterThan(0);
      expect(p.lastUsedAt).toBeDefined();
    }
    const kept = await prunePrepared(engine.docker, usage, await f.core.app.installationId(), { olderThanMs: 3_600_000 });
    expect(kept.removed.filter((r) => listed.some((p) => p.key === r.key))).toEqual([]);
    // The CLI: `airlock env list` names them with their inputs; a bad age is a clear error.
    const listing = await cli(['list']);
    expect(listing.code).toBe(0);
    for (const p of listed) expect(listing.out).toContain(p.key);
    expect(listing.out).toContain('inputs: package.json, package-lock.json');
    expect(listing.out).toMatch(/2 prepared environment\(s\)/);
    await expect(cli(['prune', '--older-than', 'soon'])).rejects.toThrow(/--older-than 'soon' is not an age; write a number and a unit/);
    const recent = await cli(['prune', '--older-than', '1h']);
    expect(recent.out).toContain('Removed 0 prepared environment(s)');
    const pruned = await f.services.environments.prune({});
    expect(pruned.removed.map((r) => r.key)).toEqual(expect.arrayContaining(listed.map((p) => p.key)));
    expect((await f.services.environments.list({})).environments.filter((p) => p.project === path.resolve(projectDir))).toEqual([]);
  }, 600_000);

  it('setup ends completely: a process it leaves and a loop watching for the run token are gone before the agent, saw no token, and left no trace in the prepared image', async () => {
    // One process left in the background, and a double-forked loop (reparented to init, outside any
    // tree the helper knows) that records every run token it can find in any process's environment.
    const loop = `while :; do for e in /proc/[0-9]*/environ; do tr "\\0" "\\n" < "$e" 2>/dev/null | grep -o "airlock-run-[A-Za-z0-9_-]*"; done >> /workspace/.watch/seen; echo t >> /workspace/.watch/ticks; echo t >> "$HOME/watch-ticks"; sleep 0.05; done`;
    const setup = `mkdir -p .watch; : > .watch/seen; (sleep 1000 &); (sh -c '${loop}' w4tch-l00p &); echo started`;
    const projectDir = await f.project({
      'src.txt': 'v1\n',
      '.devcontainer/devcontainer.json': JSON.stringify({ image: airlockImage, postCreateCommand: setup }),
    });
    // The agent lists every process it can see, and what the loop recorded.
    const ps = `echo BEGIN-PS; for p in /proc/[0-9]*; do echo "$(tr '\\0' ' ' < $p/cmdline 2>/dev/null)"; done; echo END-PS; echo "seen=[$(cat .watch/seen)]"; echo ${AGENT_MARK} > agent.txt`;
    const done = await run(projectDir, ps);
    made.push(done.environment?.prepared?.image ?? '');
    expect(done.environment?.prepared?.status).toBe('created');
    const out = lastToolOutput();
    const listing = out.slice(out.indexOf('BEGIN-PS'), out.indexOf('END-PS'));
    expect(listing.length).toBeGreaterThan(10);
    expect(listing).not.toContain('sleep 1000');
    expect(listing).not.toContain('w4tch-l00p');
    expect(out).toContain('seen=[]');
    // Nothing wrote after setup: the review holds only the agent's file (the loop's ticks would be changes).
    expect(done.changedFiles.map((c) => `${c.status} ${c.path}`)).toEqual(['added agent.txt']);
    const audit = await import('node:fs/promises').then((fs) => fs.readFile(f.core.store.paths(done.id).audit, 'utf8'));
    expect(audit).toMatch(/setup ended: [2-9]\d* process\(es\) it left running were killed; none of the agent's user remains \(verified by the engine's process list\)/);
    // The prepared image: setup's own ticks (written during setup) at most, no run token, nothing of the agent.
    const bytes = await savedImage(done.environment?.prepared?.image ?? '');
    expect(tokens.length).toBeGreaterThanOrEqual(1);
    for (const t of tokens) expect(bytes.includes(Buffer.from(t))).toBe(false);
    expect(bytes.includes(Buffer.from(AGENT_MARK))).toBe(false);
    expect(await leftoversOf(done.id)).toEqual([]);
  }, 600_000);
});
