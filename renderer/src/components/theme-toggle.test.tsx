// @vitest-environment jsdom
import { act, cleanup, fireEvent, render, screen, waitFor } from '@testing-library/react';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { FakeServices } from '../../../test/support/fake-services';
import { connectFakeApp } from '../../../test/support/renderer-harness';
import { resolveTheme, useDocumentTheme } from '../lib/theme';
import { useSettingsStore } from '../stores/settings-store';
import { matchLabel } from './terminal-search';
import { ThemeToggle } from './theme-toggle';

/** The OS preference jsdom lacks: a settable `prefers-color-scheme: dark`. */
function fakeSystemPreference(dark: boolean) {
  const listeners = new Set<() => void>();
  const query = { matches: dark, addEventListener: (_: string, l: () => void) => listeners.add(l), removeEventListener: (_: string, l: () => void) => listeners.delete(l) };
  window.matchMedia = (() => query) as unknown as typeof window.matchMedia;
  return (next: boolean) => {
    query.matches = next;
    for (const l of listeners) l();
  };
}

function Themed() {
  useDocumentTheme();
  return <ThemeToggle />;
}

describe('theme toggle (jsdom, fake services through the real router)', () => {
  let services: FakeServices;
  let disconnect: () => void;
  let setSystemDark: (dark: boolean) => void;
  beforeEach(async () => {
    setSystemDark = fakeSystemPreference(false);
    ({ services, disconnect } = connectFakeApp({ autoFinish: true }));
    await useSettingsStore.getState().load();
  });
  afterEach(() => {
    cleanup();
    disconnect();
  });

  it('light, dark and system: saved in settings and applied to the document', async () => {
    render(<Themed />);
    fireEvent.click(screen.getByRole('radio', { name: 'Dark' }));
    await waitFor(() => expect(document.documentElement.dataset.theme).toBe('dark'));
    expect((await services.settings.get({})).theme).toBe('dark');
    expect(screen.getByRole('radio', { name: 'Dark' }).getAttribute('aria-checked')).toBe('true');

    fireEvent.click(screen.getByRole('radio', { name: 'Light' }));
    await waitFor(() => expect(document.documentElement.dataset.theme).toBe('light'));
    expect((await services.settings.get({})).theme).toBe('light');

    // System follows the OS preference, also when it changes later.
    fireEvent.click(screen.getByRole('radio', { name: 'System' }));
    await waitFor(() => expect((useSettingsStore.getState().settings?.theme)).toBe('system'));
    expect(document.documentElement.dataset.theme).toBe('light');
    act(() => setSystemDark(true));
    expect(document.documentElement.dataset.theme).toBe('dark');
    expect((await services.settings.get({})).theme).toBe('system');
  });

  it('follows a change made elsewhere (another window, the CLI)', async () => {
    render(<Themed />);
    await act(async () => void (await services.settings.update({ theme: 'dark' })));
    await waitFor(() => expect(screen.getByRole('radio', { name: 'Dark' }).getAttribute('aria-checked')).toBe('true'));
    expect(document.documentElement.dataset.theme).toBe('dark');
  });
});

describe('resolveTheme and the search count', () => {
  it('resolves a choice against the system preference', () => {
    expect(resolveTheme('light', true)).toBe('light');
    expect(resolveTheme('dark', false)).toBe('dark');
    expect(resolveTheme('system', true)).toBe('dark');
    expect(resolveTheme(undefined, false)).toBe('light');
  });

  it('says where the search is', () => {
    expect(matchLabel('', { resultIndex: 0, resultCount: 3 })).toBe('');
    expect(matchLabel('x', { resultIndex: 1, resultCount: 3 })).toBe('2 of 3');
    expect(matchLabel('x', { resultIndex: -1, resultCount: 0 })).toBe('No results');
    expect(matchLabel('x', { resultIndex: -1, resultCount: 1000 })).toBe('1000+ matches');
  });
});
