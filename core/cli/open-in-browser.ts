import { spawn } from 'node:child_process';
import { hostToolCwd } from '../common/host-tool-env';
import { findTool } from '../common/resolve-tool';

/**
 * Opens `url` in the user's browser, best effort: the caller has printed the URL already, which is
 * the fallback when no opener is installed (a server, a container).
 */
export async function openInBrowser(url: string, env: NodeJS.ProcessEnv): Promise<void> {
  // From PATH only: the CLI often runs in the project folder, which must not supply the opener.
  const cmd = await findTool(process.platform === 'darwin' ? 'open' : process.platform === 'win32' ? 'explorer.exe' : 'xdg-open', env);
  if (!cmd) return;
  try {
    const child = spawn(cmd, [url], { stdio: 'ignore', detached: true, cwd: hostToolCwd() });
    child.on('error', () => {}); // the printed URL is enough
    child.unref();
  } catch {
    // same: printing the URL is the fallback
  }
}
