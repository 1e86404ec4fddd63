import { chmod, mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { resolveAirlockCommand } from './airlock-command';
import { mcpSetupLines } from './mcp-setup';

const dirs: string[] = [];
afterEach(async () => {
  for (const d of dirs.splice(0)) await rm(d, { recursive: true, force: true });
});

async function tmp(): Promise<string> {
  const d = await mkdtemp(path.join(tmpdir(), 'airlock-cmd-'));
  dirs.push(d);
  return d;
}

describe('the command the MCP setup lines start', () => {
  it('is a bare airlock only when airlock is on the PATH', async () => {
    const root = await tmp();
    const binDir = await tmp();
    await mkdir(path.join(root, 'bin'));
    await writeFile(path.join(root, 'bin', 'airlock.js'), '');
    const app = { appRoot: root, packaged: false };
    const node = { execPath: '/opt/node/bin/node', electron: false };
    expect(await resolveAirlockCommand(app, { PATH: binDir }, node)).toEqual({ command: '/opt/node/bin/node', args: [path.join(root, 'bin', 'airlock.js')], onPath: false });
    await writeFile(path.join(binDir, 'airlock'), '#!/bin/sh\n');
    await chmod(path.join(binDir, 'airlock'), 0o755);
    expect(await resolveAirlockCommand(app, { PATH: binDir }, node)).toEqual({ command: 'airlock', args: [], onPath: true });
  });

  it('under Electron takes the node on the PATH, never the Electron binary', async () => {
    const root = await tmp();
    const binDir = await tmp();
    await mkdir(path.join(root, 'bin'));
    await writeFile(path.join(root, 'bin', 'airlock.js'), '');
    await writeFile(path.join(binDir, 'node'), '#!/bin/sh\n');
    await chmod(path.join(binDir, 'node'), 0o755);
    const cmd = await resolveAirlockCommand({ appRoot: root, packaged: false }, { PATH: binDir }, { execPath: '/opt/Airlock/airlock', electron: true });
    expect(cmd.command).toBe(path.join(binDir, 'node'));
  });

  it('writes the command into every client format, quoted for each', () => {
    const lines = mcpSetupLines(undefined, { command: '/home/me/my node/node', args: ['/srv/air"lock/bin/airlock.js'] });
    const by = new Map(lines.map((l) => [l.client, l.text]));
    expect(by.get('claude-code')).toBe(`claude mcp add airlock -- '/home/me/my node/node' '/srv/air"lock/bin/airlock.js' mcp`);
    expect(by.get('codex')).toContain('command = "/home/me/my node/node"\nargs = ["/srv/air\\"lock/bin/airlock.js", "mcp"]');
    expect(JSON.parse(by.get('vscode') ?? '{}')).toEqual({ servers: { airlock: { type: 'stdio', command: '/home/me/my node/node', args: ['/srv/air"lock/bin/airlock.js', 'mcp'] } } });
    expect(mcpSetupLines().find((l) => l.client === 'claude-code')?.text).toBe('claude mcp add airlock -- airlock mcp');
  });
});
