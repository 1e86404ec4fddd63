import { access } from 'node:fs/promises';

/** Whether something is at `p` (a dangling symlink counts as nothing). */
export function pathExists(p: string): Promise<boolean> {
  return access(p).then(
    () => true,
    () => false,
  );
}
