/**
 * Killing a whole process tree: the process group the command leads (it is spawned with setsid),
 * plus any descendant that moved to its own group or session, found through /proc before the
 * signal (once reparented to init, the parent link is gone).
 */
import { readdir, readFile } from 'node:fs/promises';

async function parentMap(): Promise<Map<number, number[]>> {
  const children = new Map<number, number[]>();
  let entries: string[];
  try {
    entries = await readdir('/proc');
  } catch {
    return children; // Not Linux: the process group kill below has to do.
  }
  await Promise.all(
    entries.map(async (name) => {
      if (!/^\d+$/.test(name)) return;
      try {
        const stat = await readFile(`/proc/${name}/stat`, 'utf8');
        // Field 4 (ppid) follows the command name, which is in parentheses and may contain spaces.
        const rest = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
        const ppid = Number(rest[1]);
        const list = children.get(ppid) ?? [];
        list.push(Number(name));
        children.set(ppid, list);
      } catch {
        // The process exited while we looked.
      }
    }),
  );
  return children;
}

/** All descendants of `pid` (not including it). */
export async function descendants(pid: number): Promise<number[]> {
  const children = await parentMap();
  const out: number[] = [];
  const stack = [pid];
  while (stack.length > 0) {
    const next = children.get(stack.pop()!) ?? [];
    for (const child of next) {
      out.push(child);
      stack.push(child);
    }
  }
  return out;
}

function signal(pid: number, sig: NodeJS.Signals): void {
  try {
    process.kill(pid, sig);
  } catch {
    // Already gone (ESRCH) or not ours.
  }
}

/** Sends `sig` to the group led by `pgid`, its leader and every known descendant. */
export async function signalTree(pgid: number, sig: NodeJS.Signals, known: Set<number>): Promise<void> {
  for (const pid of await descendants(pgid)) known.add(pid);
  signal(-pgid, sig);
  signal(pgid, sig);
  for (const pid of known) signal(pid, sig);
}

/** Whether any process of the tree is still alive. */
export function treeAlive(pgid: number, known: Set<number>): boolean {
  for (const pid of [-pgid, ...known]) {
    try {
      process.kill(pid, 0);
      return true;
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === 'EPERM') return true;
    }
  }
  return false;
}
