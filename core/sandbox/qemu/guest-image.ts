import { lstat } from 'node:fs/promises';
import path from 'node:path';
import { AirlockError } from '../../../contracts/errors';
import { HELPER_COMMAND, HELPER_LOADER, HELPER_NODE, HELPER_PATH, LOADER_PRELOAD_FILE } from '../docker/container-config';

/**
 * What the guest init (resources/vm/guest-init.sh) needs of an image besides a shell, checked on the
 * unpacked file system before a base disk is written, so an image that cannot boot as a VM is
 * refused with its reason instead of a VM that powers off (docs/architecture.md §16).
 */

/** A path inside the unpacked root; never follows a symlink out of it (lstat only). */
async function presentIn(root: string, file: string): Promise<boolean> {
  return lstat(path.join(root, file.replace(/^\/+/, ''))).then(
    () => true,
    () => false,
  );
}

/** The image's PATH entries (its `ENV PATH`, else the usual ones). */
function pathDirs(env: string[]): string[] {
  const value = env.find((e) => e.startsWith('PATH='))?.slice(5) ?? '/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin';
  return value.split(':').filter((d) => d.startsWith('/'));
}

async function onPath(root: string, env: string[], name: string): Promise<boolean> {
  for (const dir of [...pathDirs(env), '/usr/bin', '/bin']) if (await presentIn(root, path.posix.join(dir, name))) return true;
  return false;
}

/**
 * The helper's command line in the guest: the Docker sandbox's, Airlock's own loader, libraries and
 * Node by absolute path (every Airlock and derived image carries /opt/airlock whole; `checkGuestImage`
 * refuses one that does not). Never a `node` from the image's PATH (docs/architecture.md §2.3).
 */
export function guestHelperCommand(): string[] {
  return [...HELPER_COMMAND];
}

/**
 * Refuses an image the guest init cannot start: no helper, no `setpriv` (it drops the helper's
 * privileges), or neither perl nor python3 (one of them reseeds the kernel's random pool of a
 * restored VM, so clones of one snapshot never share random bytes). Throws IMAGE_INCOMPATIBLE.
 */
export async function checkGuestImage(root: string, image: string, env: string[]): Promise<void> {
  const missing: string[] = [];
  if (!(await presentIn(root, HELPER_PATH))) missing.push(`Airlock's helper (${HELPER_PATH}; run it through --environment, which adds Airlock's runtime, rather than as a raw image)`);
  else if (!(await presentIn(root, HELPER_NODE)) || !(await presentIn(root, HELPER_LOADER))) missing.push(`Airlock's own Node and loader (${HELPER_NODE}, ${HELPER_LOADER}; an image derived by an older Airlock: let this one derive it again)`);
  if (!(await presentIn(root, '/usr/bin/setpriv'))) missing.push('/usr/bin/setpriv (util-linux), which drops the helper\'s privileges');
  if (!(await onPath(root, env, 'perl')) && !(await onPath(root, env, 'python3'))) missing.push('perl or python3, which reseed the kernel\'s random pool of each VM restored from a snapshot');
  if (await presentIn(root, LOADER_PRELOAD_FILE)) {
    // Every glibc loader reads it, Airlock's own included: its libraries would load into the root helper.
    throw new AirlockError(
      'IMAGE_INCOMPATIBLE',
      `${image} has ${LOADER_PRELOAD_FILE}, which would load its libraries into Airlock's helper (root in the VM). Remove that file from the image (it is for debugging a system, never for a sandbox) and rebuild it.`,
      { field: 'isolation' },
    );
  }
  if (missing.length) {
    throw new AirlockError(
      'IMAGE_INCOMPATIBLE',
      `${image} cannot boot as an Airlock VM: it lacks ${missing.join('; and ')}. Add them to the image (Debian and Ubuntu images have util-linux and perl), or use container isolation (runc or gVisor) for this environment.`,
      { field: 'isolation' },
    );
  }
}
