/**
 * Commands are the OOM killer's first choice, the helper is not (docs/architecture.md §2.3).
 *
 * The helper is root without DAC_OVERRIDE and cannot write a command's /proc/<pid>/oom_score_adj once
 * the command has exec'd as the agent. It does not need to: the value is per process and a fork
 * copies it (with its floor, `oom_score_adj_min`, which only a CAP_SYS_RESOURCE writer moves). So the
 * helper raises its OWN value just before the fork that child_process and node-pty both do
 * synchronously inside their spawn call, and puts it back right after. Raising one's own value needs
 * no privilege; lowering it is allowed down to the floor, and the helper's starting value is never
 * below that floor, which `init` proves once by writing it back before relying on it. No write to
 * another process's files, no seteuid, no extra exec; nothing here allocates a pid, so a fork bomb
 * that exhausts the pids limit cannot make it fail half-way.
 *
 * The agent can lower its commands again, but only down to the same floor: never below the helper.
 */
import { closeSync, constants, openSync, readFileSync, writeSync } from 'node:fs';

/** The score every command starts with: the most likely victim there is. */
export const COMMAND_OOM_SCORE_ADJ = 1000;

const SELF = '/proc/self/oom_score_adj';

/** The open file and the helper's own value, or null where the trick is unavailable. */
let state: { fd: number; own: string } | null | undefined;

/**
 * Reads the helper's own score and proves it can write it back (the kernel refuses a value below
 * the floor); keeps the file open (close-on-exec) so a spawn costs two writes. Cheap, once.
 */
export function initOomScore(log: (message: string) => void = () => undefined): void {
  if (state !== undefined) return;
  state = null;
  let fd: number | undefined;
  try {
    const own = readFileSync(SELF, 'utf8').trim();
    if (!/^-?\d{1,4}$/.test(own)) throw new Error(`unexpected value ${JSON.stringify(own.slice(0, 20))}`);
    fd = openSync(SELF, constants.O_WRONLY);
    writeSync(fd, own);
    // Already at the top: commands inherit it as they are; nothing to raise or restore.
    if (Number(own) >= COMMAND_OOM_SCORE_ADJ) {
      closeSync(fd);
      return;
    }
    state = { fd, own };
  } catch (err) {
    if (fd !== undefined) closeSync(fd);
    log(`commands keep the helper's OOM score (${SELF}: ${(err as Error).message})`);
  }
}

/**
 * Runs `spawn` (which must fork synchronously) with the helper's score raised, so the child and
 * everything it forks start at COMMAND_OOM_SCORE_ADJ; the helper's own value is back before this
 * returns or throws.
 */
export function spawnWithRaisedOomScore<T>(spawn: () => T): T {
  const s = state;
  if (!s) return spawn();
  try {
    writeSync(s.fd, String(COMMAND_OOM_SCORE_ADJ));
  } catch {
    return spawn();
  }
  try {
    return spawn();
  } finally {
    try {
      writeSync(s.fd, s.own);
    } catch (err) {
      // Unreachable (init proved the write): the helper stays the kernel's peer of its commands, not worse.
      process.stderr.write(`[airlock-helper] could not restore its OOM score: ${(err as Error).message}\n`);
      state = null;
    }
  }
}

