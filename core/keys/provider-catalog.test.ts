import { mkdtemp, readFile, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { normalizeBaseUrl, ProviderCatalog } from './provider-catalog';

describe('ProviderCatalog', () => {
  let home: string;
  beforeEach(async () => {
    home = await mkdtemp(path.join(os.tmpdir(), 'airlock-cat-'));
  });
  afterEach(async () => {
    await rm(home, { recursive: true, force: true });
  });

  it('lists the built-ins, adds, re-points and removes OpenAI-compatible providers, persisting them', async () => {
    const cat = new ProviderCatalog({ home });
    expect((await cat.list()).map((p) => p.id)).toEqual(['anthropic', 'openai', 'claude-subscription', 'chatgpt-signin']);
    await cat.add({ id: 'ollama', baseUrl: 'http://127.0.0.1:11434/v1/', requiresKey: false });
    await cat.setBaseUrl('anthropic', 'https://gateway.example.test/anthropic/v1');
    const again = new ProviderCatalog({ home });
    expect(await again.get('ollama')).toMatchObject({ kind: 'openai-compatible', baseUrl: 'http://127.0.0.1:11434/v1', requiresKey: false, builtin: false });
    expect((await again.get('anthropic')).baseUrl).toBe('https://gateway.example.test/anthropic');
    expect(await again.remove('ollama')).toBe(true);
    expect(await again.find('ollama')).toBeUndefined();
    expect(JSON.parse(await readFile(path.join(home, 'providers.json'), 'utf8'))).toMatchObject({ version: 1, custom: [] });
  });

  it('refuses bad ids, bad URLs, credentials in URLs and unknown providers with typed errors', async () => {
    const cat = new ProviderCatalog({ home });
    await expect(cat.add({ id: 'Bad Id', baseUrl: 'http://x.test' })).rejects.toMatchObject({ kind: 'INVALID_INPUT' });
    await expect(cat.add({ id: 'openai', baseUrl: 'http://x.test' })).rejects.toMatchObject({ kind: 'CONFLICT' });
    await expect(cat.add({ id: 'x', baseUrl: 'ftp://x.test' })).rejects.toMatchObject({ kind: 'INVALID_INPUT' });
    await expect(cat.add({ id: 'x', baseUrl: 'http://user:sk-secret@x.test/v1' })).rejects.toMatchObject({ kind: 'INVALID_INPUT' });
    await expect(cat.get('nope')).rejects.toMatchObject({ kind: 'PROVIDER_UNKNOWN', message: expect.stringContaining('providers add') });
    expect(() => normalizeBaseUrl('not a url', 'openai')).toThrow(/not a URL/);
  });
});
