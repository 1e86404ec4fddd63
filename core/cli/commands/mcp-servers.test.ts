/**
 * `airlock mcp-servers` against the real OS keychain (a service of this test's own, so no real entry
 * is touched): the token goes to the keychain only, never into a file or the command's output.
 */
import { randomBytes } from 'node:crypto';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { Readable } from 'node:stream';
import { afterAll, describe, expect, it } from 'vitest';
import { captureIo } from '../../../test/support/cli-io';
import { requirePrerequisite } from '../../../test/support/prerequisites';
import { mcpServerRegistryFor, mcpServersCommand } from './mcp-servers';

const keychain = await requirePrerequisite('keychain');
const homes: string[] = [];
const service = `airlock-test-mcp-servers-${randomBytes(4).toString('hex')}`;
const env = { ...process.env, AIRLOCK_KEYCHAIN_SERVICE: service };
afterAll(async () => {
  for (const h of homes) await rm(h, { recursive: true, force: true });
});

async function run(args: string[], home: string, stdin = '') {
  const { io, out } = captureIo({ ...env, AIRLOCK_HOME: home });
  const withStdin = { ...io, stdin: Object.assign(Readable.from([Buffer.from(stdin)]), { isTTY: false }) };
  const code = await mcpServersCommand.run(args, withStdin);
  return { code, out: out() };
}

describe.skipIf(!keychain.ok)('airlock mcp-servers', () => {
  it('add (token from stdin) / list / rm: the token in the keychain only, never printed or in a file', async () => {
    const home = await mkdtemp(path.join(os.tmpdir(), 'airlock-mcp-servers-'));
    homes.push(home);
    const token = `mcp-tok-${randomBytes(16).toString('hex')}`;
    const added = await run(['add', 'tracker', '--url', 'https://mcp.tracker.test/mcp'], home, `${token}\n`);
    expect(added.out).toContain('added tracker (https://mcp.tracker.test, http, bearer from the OS keychain); give it to a run with --mcp tracker');
    await run(['add', 'local', '--url', 'http://127.0.0.1:9/mcp', '--auth', 'header:X-Api-Key', '--transport', 'sse'], home, 'another-token-value\n');
    const listed = await run(['list'], home);
    expect(listed.out).toBe('tracker  https://mcp.tracker.test/mcp  http  auth bearer\nlocal  http://127.0.0.1:9/mcp  sse  auth header:X-Api-Key\n');
    const json = await run(['list', '--json'], home);
    const file = await readFile(path.join(home, 'mcp-servers.json'), 'utf8');
    expect(file + added.out + listed.out + json.out).not.toContain(token);
    const [resolved] = await mcpServerRegistryFor({ home, keychainService: service }).resolve(['tracker']);
    expect(resolved!.credential!.reveal()).toBe(token);
    expect(JSON.stringify(resolved)).not.toContain(token);
    expect((await run(['rm', 'tracker'], home)).out).toContain('removed tracker and its token');
    expect((await run(['rm', 'local'], home)).out).toContain('removed local');
    await expect(mcpServerRegistryFor({ home, keychainService: service }).resolve(['tracker'])).rejects.toMatchObject({ kind: 'NOT_FOUND', message: expect.stringContaining('airlock mcp-servers add tracker') });
  });

  it('refuses plain http off loopback, a credential in the URL, a bad name and a token given as an argument', async () => {
    const home = await mkdtemp(path.join(os.tmpdir(), 'airlock-mcp-servers-'));
    homes.push(home);
    await expect(run(['add', 'web', '--url', 'http://mcp.example.test/mcp'], home, 'tokentoken\n')).rejects.toThrow(/must be https \(plain http only to this machine's loopback\)/);
    await expect(run(['add', 'web', '--url', 'https://user:pw@mcp.example.test/mcp'], home, 'tokentoken\n')).rejects.toThrow(/not in the URL/);
    await expect(run(['add', 'Bad Name', '--url', 'https://mcp.example.test/mcp'], home, 'tokentoken\n')).rejects.toThrow(/lower-case letters/);
    await expect(run(['add', 'web', 'tokentoken', '--url', 'https://mcp.example.test/mcp'], home)).rejects.toThrow(/token goes on stdin/);
    expect((await run(['list'], home)).out).toContain('no MCP servers');
  });
});
