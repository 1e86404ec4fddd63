import { useEffect, useState } from 'react';
import type { Settings } from '../../../contracts';
import { useSettingsStore } from '../stores/settings-store';

export type ThemeChoice = Settings['theme'];
export type ResolvedTheme = 'light' | 'dark';

const DARK_QUERY = '(prefers-color-scheme: dark)';

/** What a choice means now: `system` follows the OS's light/dark preference. */
export function resolveTheme(choice: ThemeChoice | undefined, systemDark: boolean): ResolvedTheme {
  if (choice === 'light' || choice === 'dark') return choice;
  return systemDark ? 'dark' : 'light';
}

function systemPrefersDark(): boolean {
  return typeof matchMedia === 'function' && matchMedia(DARK_QUERY).matches;
}

/** The theme in effect, following the setting and, for `system`, the OS preference as it changes. */
export function useResolvedTheme(): ResolvedTheme {
  const choice = useSettingsStore((s) => s.settings?.theme);
  const [systemDark, setSystemDark] = useState(systemPrefersDark);
  useEffect(() => {
    if (typeof matchMedia !== 'function') return;
    const query = matchMedia(DARK_QUERY);
    const onChange = () => setSystemDark(query.matches);
    query.addEventListener('change', onChange);
    return () => query.removeEventListener('change', onChange);
  }, []);
  return resolveTheme(choice, systemDark);
}

/** Puts the theme in effect on the document (styles.css keys its colours on `data-theme`). */
export function useDocumentTheme(): void {
  const theme = useResolvedTheme();
  useEffect(() => {
    document.documentElement.dataset.theme = theme;
    document.documentElement.style.colorScheme = theme;
  }, [theme]);
}
