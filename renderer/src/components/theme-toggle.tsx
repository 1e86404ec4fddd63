import { errorMessage } from '../api';
import type { ThemeChoice } from '../lib/theme';
import { useAppStore } from '../stores/app-store';
import { useSettingsStore } from '../stores/settings-store';

const CHOICES: Array<{ value: ThemeChoice; label: string }> = [
  { value: 'light', label: 'Light' },
  { value: 'dark', label: 'Dark' },
  { value: 'system', label: 'System' },
];

/** Light, dark, or follow the system; saved in settings, so the app and the CLI's UI share it. */
export function ThemeToggle() {
  const theme = useSettingsStore((s) => s.settings?.theme ?? 'system');
  const choose = (value: ThemeChoice) => {
    useSettingsStore.getState().update({ theme: value }).catch((err) => useAppStore.getState().notify('error', `Could not save the theme: ${errorMessage(err)}`));
  };
  return (
    <div className="theme-toggle" role="radiogroup" aria-label="Theme">
      {CHOICES.map((c) => (
        <button key={c.value} role="radio" aria-checked={theme === c.value} className="theme-choice" onClick={() => choose(c.value)}>{c.label}</button>
      ))}
    </div>
  );
}
