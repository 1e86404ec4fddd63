import { useState } from 'react';
import { cliCommandFor, type AttemptSpec, type StartRunInput } from '../../../contracts';
import { useAppStore } from '../stores/app-store';

/**
 * The `airlock run` command that starts the same run as the form (contracts/cli-command.ts): what the
 * app can do, the CLI can too, and the line can go into a script. Nothing in it is a secret: secrets
 * appear by name only.
 */
export function CliLine({ input, attempts }: { input: StartRunInput; attempts: AttemptSpec[] | undefined }) {
  const [open, setOpen] = useState(false);
  const line = cliCommandFor(input, attempts);
  const copy = async () => {
    try {
      await navigator.clipboard.writeText(line);
      useAppStore.getState().notify('success', 'Command copied');
    } catch {
      useAppStore.getState().notify('error', 'The clipboard is not available here; select the command and copy it.');
    }
  };
  return (
    <details className="cli-line" open={open} onToggle={(e) => setOpen(e.currentTarget.open)}>
      <summary className="muted">The same run from the command line</summary>
      <div className="row" style={{ flexWrap: 'nowrap', alignItems: 'flex-start' }}>
        <code className="mono" aria-label="CLI command" style={{ flex: 1, whiteSpace: 'pre-wrap', overflowWrap: 'anywhere' }}>{line}</code>
        <button type="button" className="btn small" onClick={() => void copy()}>Copy</button>
      </div>
    </details>
  );
}
