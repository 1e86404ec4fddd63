/**
 * `wsl.exe` command lines and output parsers for the WSL2 driver (Windows). Pure functions, checked
 * by unit tests against WSL's documented CLI (see resources/vm/README.md for what was and was not
 * run on a real Windows machine).
 *
 * Each run is its own WSL2 distribution imported from the sandbox image's root filesystem
 * (`wsl --import`), removed with `wsl --unregister` (which deletes its virtual disk). All WSL2
 * distributions share one utility VM and its network, so the helper is started in a fresh network
 * namespace (`unshare --net`: only `lo`); the helper keeps uid 0 with four capabilities and runs
 * every command as the image's non-root user (see wslHelperScript).
 */
import { HELPER_CAPS, HELPER_COMMAND } from '../docker/container-config';

export const WSL_DISTRO_PREFIX = 'airlock-';
/**
 * The helper's command: the Docker sandbox's, Airlock's own loader and Node by absolute path, never a
 * `node` from the distribution's PATH; it starts under `env -i` with Airlock's variables only (§2.3).
 */
export const WSL_HELPER = [...HELPER_COMMAND];

export function distroName(runId: string): string {
  return `${WSL_DISTRO_PREFIX}${runId}`;
}

/** `wsl.exe --import <name> <installDir> <rootfs.tar> --version 2` */
export function wslImportArgs(name: string, installDir: string, rootfsTar: string): string[] {
  return ['--import', name, installDir, rootfsTar, '--version', '2'];
}

/** `wsl.exe --terminate <name>` */
export function wslTerminateArgs(name: string): string[] {
  return ['--terminate', name];
}

/** `wsl.exe --unregister <name>`: stops the distribution and deletes its ext4.vhdx. */
export function wslUnregisterArgs(name: string): string[] {
  return ['--unregister', name];
}

/** `wsl.exe --list --verbose` */
export function wslListArgs(): string[] {
  return ['--list', '--verbose'];
}

export interface WslHelperOptions {
  uid: number;
  gid: number;
  home: string;
  pids: number;
}

/**
 * What every WSL2 distribution shares and wsl.conf cannot turn off, hidden from the helper by its own
 * mount namespace: /mnt/wsl (mounted into every distribution: microsoft/WSL src/linux/init/main.cpp
 * CROSS_DISTRO_SHARE_PATH), WSLg's sockets and the GPU libraries (/mnt/wslg, /tmp/.X11-unix,
 * /usr/lib/wsl), and the GPU device /dev/dxg.
 */
export const WSL_MASKED_PATHS = ['/mnt/wsl', '/mnt/wslg', '/tmp/.X11-unix', '/usr/lib/wsl'] as const;

/**
 * The helper's bounding set for setpriv: only HELPER_CAPS (the Docker driver's, one definition:
 * core/sandbox/docker/container-config.ts), as resources/vm/guest-init.sh gives the VM's helper.
 */
export const WSL_HELPER_BOUNDING_SET = `-all,${HELPER_CAPS.map((c) => `+${c.toLowerCase()}`).join(',')}`;

/**
 * The script run as root in the distribution to start the helper: new network and mount namespaces
 * (only `lo`, up; the shared paths masked), then the helper split of docs/architecture.md §2.3, as
 * the VM's guest init does it: the helper stays uid 0 but keeps only SETUID, SETGID and KILL (root's exec takes its bounding set as its permitted set; nothing inheritable; no
 * supplementary groups; no_new_privs, so nothing it runs can gain more), and starts every command as
 * the agent's user (AIRLOCK_AGENT_USER in its otherwise clean environment), which then holds no
 * capability: the agent cannot signal, ptrace or write the helper, nor write /airlock. The process
 * limit is the agent's: RLIMIT_NPROC counts the agent's uid, and the kernel does not apply it to root.
 * The image's `ip` (iproute2) brings `lo` up; `/opt/airlock-vm/busybox`, when a rootfs carries one, is
 * the fallback.
 */
export function wslHelperScript(o: WslHelperOptions): string {
  const masks = WSL_MASKED_PATHS.map((p) => `if [ -d ${p} ]; then mount -t tmpfs -o ro,nosuid,nodev,noexec,size=4k airlock-masked ${p} || exit 1; fi`);
  const inner = [
    '(ip link set lo up || /opt/airlock-vm/busybox ip link set lo up) >/dev/null 2>&1 || { echo "airlock: cannot bring up lo" >&2; exit 1; }',
    ...masks,
    'if [ -e /dev/dxg ]; then mount --bind /dev/null /dev/dxg || exit 1; fi',
    'cd /workspace 2>/dev/null || cd /',
    `exec prlimit --nproc=${o.pids}:${o.pids} -- setpriv --clear-groups --no-new-privs --inh-caps=-all --bounding-set=${WSL_HELPER_BOUNDING_SET} ` +
      `env -i AIRLOCK_AGENT_USER=${o.uid}:${o.gid} HOME=${o.home} PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin LANG=C.UTF-8 ${WSL_HELPER.join(' ')}`,
  ].join('; ');
  return `exec unshare --net --mount --propagation private --fork -- /bin/sh -c '${inner.replaceAll("'", `'\\''`)}'`;
}

/** `wsl.exe -d <name> -u root --cd / -- /bin/sh -c <script>`: its stdin/stdout are the channel. */
export function wslHelperArgs(name: string, o: WslHelperOptions): string[] {
  return ['--distribution', name, '--user', 'root', '--cd', '/', '--exec', '/bin/sh', '-c', wslHelperScript(o)];
}

/** `wsl.exe -d <name> -u root --exec <argv>` (setup commands). */
export function wslExecArgs(name: string, argv: readonly string[]): string[] {
  return ['--distribution', name, '--user', 'root', '--cd', '/', '--exec', ...argv];
}

/**
 * wsl.exe writes its own messages in UTF-16LE (unless `WSL_UTF8=1`); commands run inside a
 * distribution write UTF-8. Decodes either, dropping a BOM and CRs.
 */
export function decodeWslOutput(buf: Buffer): string {
  let text: string;
  const looksUtf16 = buf.length >= 2 && ((buf[0] === 0xff && buf[1] === 0xfe) || (buf.length >= 4 && buf[1] === 0 && buf[3] === 0));
  if (looksUtf16) text = buf.toString('utf16le');
  else text = buf.toString('utf8');
  return text.replace(/^\uFEFF/, '').replaceAll('\r', '').replaceAll('\0', '');
}

export interface WslDistro {
  name: string;
  state: string;
  version: number;
  isDefault: boolean;
}

/**
 * `wsl --list --verbose`:
 * ```
 *   NAME                   STATE           VERSION
 * * Ubuntu                 Running         2
 *   airlock-r-1            Stopped         2
 * ```
 */
export function parseWslList(output: Buffer | string): WslDistro[] {
  const text = typeof output === 'string' ? output : decodeWslOutput(output);
  const out: WslDistro[] = [];
  for (const raw of text.split('\n')) {
    const line = raw.replace(/\s+$/, '');
    if (!line.trim() || /^\s*\*?\s*NAME\s+STATE\s+VERSION/i.test(line)) continue;
    const m = /^\s*(\*)?\s*(\S+)\s+(\S+)\s+(\d+)\s*$/.exec(line);
    if (!m) continue;
    out.push({ name: m[2] as string, state: m[3] as string, version: Number(m[4]), isDefault: m[1] === '*' });
  }
  return out;
}

/** wsl.exe's "no such distribution" (code WSL_E_DISTRO_NOT_FOUND): unregistering it again is fine. */
export function isDistroNotFound(output: string): boolean {
  return /WSL_E_DISTRO_NOT_FOUND|There is no distribution with the supplied name/i.test(output);
}

/**
 * No distribution at all makes `wsl --list` fail with WSL_E_DEFAULT_DISTRO_NOT_FOUND, but current
 * wsl.exe prints only the localized message for it, without the code (microsoft/WSL
 * src/windows/common/WslClient.cpp), so this English check is a hint only: WslDriver confirms a
 * distribution is gone with `wslProbeArgs`, whose WSL_E_DISTRO_NOT_FOUND is printed in every language.
 */
export function isNoDistributions(output: string): boolean {
  return /WSL_E_DEFAULT_DISTRO_NOT_FOUND|has no installed distributions/i.test(output);
}

/** `wsl.exe -d <name> --exec /bin/true`: fails with WSL_E_DISTRO_NOT_FOUND (code printed) when `name` is not registered. */
export function wslProbeArgs(name: string): string[] {
  return ['--distribution', name, '--exec', '/bin/true'];
}
