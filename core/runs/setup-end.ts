import { AirlockError } from '../../contracts/errors';
import { HELPER_NODE } from '../sandbox/docker/container-config';
import type { Sandbox } from '../sandbox/sandbox';

/**
 * Ends every process the setup phase left behind (docs/architecture.md §16, "Setup ends
 * completely"): a `sleep 1000 &`, a daemon that double-forked to init, a loop waiting for the run
 * token. Run as the agent's user, `kill(-1, SIGKILL)` reaches every process of that user in the
 * sandbox's pid namespace whatever its parent (a process-tree kill misses what reparented to init),
 * and nothing else (the helper and init are root); it is repeated until a scan of `/proc` finds no
 * live process of that user. Under `no-new-privileges` such a process can change neither its uid nor
 * its way out of `/proc`. Zombies count as gone: they run nothing and hold no memory to read.
 *
 * Airlock's own Node runs it, by absolute path, with the helper's clean environment.
 */
const KILLER = `
const fs = require('fs');
const me = process.getuid(), self = process.pid, deadline = Date.now() + 20000;
const pause = new Int32Array(new SharedArrayBuffer(4));
function mine() {
  const out = [];
  for (const name of fs.readdirSync('/proc')) {
    if (!/^[0-9]+$/.test(name) || Number(name) === self) continue;
    let status;
    try { status = fs.readFileSync('/proc/' + name + '/status', 'utf8'); } catch { continue; }
    const uids = (/^Uid:\\s+(.*)$/m.exec(status) || [, ''])[1].trim().split(/\\s+/).map(Number);
    const state = (/^State:\\s+(\\S)/m.exec(status) || [, ''])[1];
    if (uids.includes(me) && state !== 'Z' && state !== 'X') out.push(Number(name));
  }
  return out;
}
let first = mine().length;
for (let left = first; left > 0; left = mine().length) {
  if (Date.now() > deadline) { process.stdout.write('left ' + left); process.exit(3); }
  try { process.kill(-1, 'SIGKILL'); } catch (e) { if (e.code !== 'ESRCH') throw e; }
  Atomics.wait(pause, 0, 0, 5);
}
process.stdout.write('ended ' + first);
`;

/**
 * Kills every process of the agent's user in the sandbox's pid namespace and checks `/proc` shows none;
 * resolves with how many there were. `kill(-1)` reaches them all at once (the kernel walks the task list
 * under the lock fork takes), so a chain that forks and exits cannot slip between a list and a kill.
 * Also the attempts check's sweep (run-check.ts). Throws with what was left.
 */
export async function killAgentProcesses(channel: Sandbox['channel']): Promise<number> {
  const r = await channel.run({ argv: [HELPER_NODE, '-e', KILLER], cwd: '/', timeoutMs: 60_000, maxOutputBytes: 4096 });
  const said = r.stdout.toString('utf8').trim();
  const m = /^ended (\d+)$/.exec(said);
  if (r.exitCode !== 0 || !m) throw new Error(`${said.slice(0, 100) || `status ${r.exitCode ?? 'killed'}`}: ${r.stderr.toString('utf8').trim().slice(-500)}`);
  return Number(m[1]);
}

/** What ending setup found, for the audit log. */
export interface SetupEnded {
  /** Processes of the agent's user still alive when setup's commands had returned. */
  leftover: number;
  /** How "none remain" was checked: by the engine from the host, or only inside the sandbox's pid namespace. */
  verifiedBy: 'engine' | 'pid-namespace';
}

/**
 * Kills every process of the agent's user in the sandbox and verifies none remain: inside, by the
 * pid namespace (the kill above), and from the host where the engine can list the sandbox's
 * processes (runc on Docker or Podman): exactly one host identity — the container's root, which
 * the helper and init run as — may remain. Anything else fails the run before the run token exists.
 */
export async function endSetupProcesses(sandbox: Sandbox): Promise<SetupEnded> {
  const hello = sandbox.channel.hello;
  if (hello.uid === hello.agentUid) {
    // A helper that runs as the agent's user would kill itself; Airlock's sandboxes never start one.
    throw new AirlockError('SANDBOX_FAILED', `Setup's processes cannot be ended: the sandbox's helper runs as the agent's user (uid ${hello.uid}). Use container, gVisor or VM isolation.`, { field: 'environment' });
  }
  let leftover = 0;
  for (let attempt = 1; ; attempt++) {
    let ended: number;
    try {
      ended = await killAgentProcesses(sandbox.channel);
    } catch (err) {
      throw new AirlockError('SANDBOX_FAILED', `Setup left processes that could not be ended (${(err as Error).message}). The agent was not started and no model was called.`, { field: 'environment' });
    }
    if (attempt === 1) leftover = ended;
    const owners = await sandbox.processOwners();
    if (!owners) return { leftover, verifiedBy: 'pid-namespace' };
    const identities = new Set(owners);
    if (identities.size <= 1) return { leftover, verifiedBy: 'engine' };
    if (attempt >= 3) {
      throw new AirlockError('SANDBOX_FAILED', `Setup left processes the engine still lists after they were killed (${owners.length} processes, host users ${[...identities].join(', ').slice(0, 200)}). The agent was not started and no model was called.`, { field: 'environment' });
    }
  }
}
