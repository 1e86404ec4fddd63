import { mkdir, mkdtemp, rm, symlink, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { APP_INDEX_URL, appProtocolHandler } from './app-protocol';
import { contentSecurityPolicy } from './csp';

describe('the app:// protocol handler', () => {
  let dir: string;
  let handler: (r: Request) => Promise<Response>;
  const csp = contentSecurityPolicy(false);
  beforeAll(async () => {
    dir = await mkdtemp(path.join(os.tmpdir(), 'airlock-app-proto-'));
    await mkdir(path.join(dir, 'renderer', 'assets'), { recursive: true });
    await writeFile(path.join(dir, 'renderer', 'index.html'), '<!doctype html><title>Airlock</title>');
    await writeFile(path.join(dir, 'renderer', 'assets', 'main.js'), 'console.log(1)');
    await writeFile(path.join(dir, 'secret.txt'), 'host file');
    await symlink(path.join(dir, 'secret.txt'), path.join(dir, 'renderer', 'assets', 'link.txt'));
    handler = appProtocolHandler(path.join(dir, 'renderer'), csp);
  });
  afterAll(() => rm(dir, { recursive: true, force: true }));

  it('serves the UI with the one CSP, typed and nosniff', async () => {
    const r = await handler(new Request(APP_INDEX_URL));
    expect(r.status).toBe(200);
    expect(r.headers.get('content-security-policy')).toBe(csp);
    expect(r.headers.get('content-type')).toBe('text/html; charset=utf-8');
    expect(r.headers.get('x-content-type-options')).toBe('nosniff');
    expect(await r.text()).toContain('<title>Airlock</title>');
    expect((await handler(new Request('app://airlock/assets/main.js'))).headers.get('content-type')).toMatch(/^text\/javascript/);
  });

  it('never serves a file outside the renderer folder, another host or a write', async () => {
    for (const url of ['app://airlock/../secret.txt', 'app://airlock/%2e%2e/secret.txt', 'app://airlock/assets/%2e%2e%2f%2e%2e%2fsecret.txt', 'app://airlock/assets/link.txt', 'app://other/index.html', 'app://airlock/missing.js']) {
      const r = await handler(new Request(url));
      expect(r.status, url).toBe(404);
      expect(await r.text()).toBe('');
    }
    expect((await handler(new Request(APP_INDEX_URL, { method: 'POST', body: 'x' }))).status).toBe(405);
  });
});
