import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { DEFAULT_SETTINGS, SettingsStore } from './settings-store';

describe('SettingsStore', () => {
  let home: string;
  beforeEach(async () => {
    home = await mkdtemp(path.join(os.tmpdir(), 'airlock-settings-'));
  });
  afterEach(async () => {
    await rm(home, { recursive: true, force: true });
  });

  it('gives the defaults when there is no file, and keeps saved fields over them', async () => {
    const store = new SettingsStore(home);
    expect(await store.get()).toEqual(DEFAULT_SETTINGS);
    await store.update({ theme: 'dark', gitHistory: 'none' });
    expect(await new SettingsStore(home).get()).toEqual({ ...DEFAULT_SETTINGS, theme: 'dark', gitHistory: 'none' });
  });

  it('refuses a file that is not JSON, naming it, and does not save over it', async () => {
    const file = path.join(home, 'settings.json');
    await writeFile(file, '{"theme": "dark",');
    const store = new SettingsStore(home);
    await expect(store.get()).rejects.toMatchObject({ kind: 'INVALID_INPUT', message: expect.stringMatching(new RegExp(`^${file.replace(/[.]/g, '\\.')} is not valid JSON.*delete it`)) });
    await expect(store.update({ theme: 'light' })).rejects.toMatchObject({ kind: 'INVALID_INPUT' });
    expect(await readFile(file, 'utf8')).toBe('{"theme": "dark",');
  });

  it('refuses a field of the wrong type, naming the file and the field', async () => {
    const file = path.join(home, 'settings.json');
    await writeFile(file, JSON.stringify({ theme: 'dark', defaultTimeoutSec: 'soon' }));
    await expect(new SettingsStore(home).get()).rejects.toMatchObject({ kind: 'INVALID_INPUT', message: expect.stringContaining(`${file}: field defaultTimeoutSec:`) });
    await writeFile(file, JSON.stringify({ prices: { 'my-model': { input: -1, output: 2 } } }));
    await expect(new SettingsStore(home).get()).rejects.toMatchObject({ message: expect.stringContaining('field prices.my-model.input') });
    await writeFile(file, '[1, 2]');
    await expect(new SettingsStore(home).get()).rejects.toMatchObject({ message: expect.stringContaining('does not hold an object') });
  });
});
