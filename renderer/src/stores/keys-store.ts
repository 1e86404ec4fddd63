import { create } from 'zustand';
import type { ChannelInput, KeychainStatus, KeyInfo, KeyTestResult, ProviderInfo } from '../../../contracts';
import { api, errorMessage } from '../api';

interface KeysState {
  keys: KeyInfo[];
  providers: ProviderInfo[];
  /** The first load answered (the screen can tell "no key yet" from "not loaded yet"). */
  loaded: boolean;
  keychain?: KeychainStatus;
  tests: Record<string, KeyTestResult | { status: 'testing' } | undefined>;
  error?: string;
  load(): Promise<void>;
  /** Saves a key; the caller clears its input field right away (the key is not kept here). */
  setKey(input: ChannelInput<'keys:set'>): Promise<KeyInfo>;
  /** Points a provider at another base URL; its key is not sent, read or changed. */
  setBaseUrl(provider: string, baseUrl: string): Promise<KeyInfo>;
  /** Saves a subscription credential (setup token or auth.json text); the caller clears its field first. */
  setSubscription(input: ChannelInput<'keys:setSubscription'>): Promise<KeyInfo>;
  /** Imports this machine's Codex sign-in. */
  importCodex(input: ChannelInput<'keys:importCodex'>): Promise<KeyInfo>;
  removeKey(provider: string): Promise<void>;
  testKey(provider: string): Promise<void>;
  addProvider(input: ChannelInput<'providers:add'>): Promise<ProviderInfo>;
  removeProvider(id: string): Promise<void>;
}

/** Key status (never keys) and providers. */
export const useKeysStore = create<KeysState>()((set, get) => ({
  keys: [],
  providers: [],
  loaded: false,
  tests: {},
  async load() {
    try {
      const [keys, providers, keychain] = await Promise.all([api().call('keys:list', {}), api().call('providers:list', {}), api().call('keys:status', {})]);
      set({ keys, providers, keychain, loaded: true, error: undefined });
    } catch (err) {
      set({ error: errorMessage(err) });
    }
  },
  // A new key or URL makes the last test's verdict stale (a "bad key" line stayed after the URL changed).
  async setKey(input) {
    const info = await api().call('keys:set', input);
    set((s) => ({ tests: { ...s.tests, [input.provider]: undefined } }));
    await get().load();
    return info;
  },
  async setBaseUrl(provider, baseUrl) {
    const info = await api().call('keys:setBaseUrl', { provider, baseUrl });
    set((s) => ({ tests: { ...s.tests, [provider]: undefined } }));
    await get().load();
    return info;
  },
  async setSubscription(input) {
    const info = await api().call('keys:setSubscription', input);
    // A new credential: the last test result was about the old one.
    set((s) => ({ tests: { ...s.tests, [info.provider]: undefined } }));
    await get().load();
    return info;
  },
  async importCodex(input) {
    const info = await api().call('keys:importCodex', input);
    set((s) => ({ tests: { ...s.tests, [info.provider]: undefined } }));
    await get().load();
    return info;
  },
  async removeKey(provider) {
    await api().call('keys:remove', { provider });
    set((s) => ({ tests: { ...s.tests, [provider]: undefined } }));
    await get().load();
  },
  async testKey(provider) {
    set((s) => ({ tests: { ...s.tests, [provider]: { status: 'testing' } } }));
    try {
      const result = await api().call('keys:test', { provider });
      set((s) => ({ tests: { ...s.tests, [provider]: result } }));
    } catch (err) {
      set((s) => ({ tests: { ...s.tests, [provider]: { provider, status: 'error', message: errorMessage(err) } } }));
    }
  },
  async addProvider(input) {
    const p = await api().call('providers:add', input);
    await get().load();
    return p;
  },
  async removeProvider(id) {
    await api().call('providers:remove', { id });
    await get().load();
  },
}));
