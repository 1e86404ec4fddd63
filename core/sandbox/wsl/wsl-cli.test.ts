/**
 * RECORDED-BEHAVIOUR TESTS (no Windows here): wsl.exe output as documented (UTF-16LE without
 * WSL_UTF8, the `--list --verbose` table, WSL_E_* error codes). NOT captured on a real Windows
 * machine; see resources/vm/README.md.
 */
import { describe, expect, it } from 'vitest';
import { decodeWslOutput, isDistroNotFound, isNoDistributions, parseWslList, wslHelperArgs, wslHelperScript, wslImportArgs, wslUnregisterArgs } from './wsl-cli';

const LIST_TEXT = '  NAME                     STATE           VERSION\r\n* Ubuntu                   Running         2\r\n  airlock-r-abc-12345678   Stopped         2\r\n  Legacy                   Stopped         1\r\n';

describe('wsl.exe CLI (recorded behaviour, not run on Windows)', () => {
  it('decodes wsl.exe output in UTF-16LE (with or without BOM) and UTF-8', () => {
    expect(decodeWslOutput(Buffer.from(LIST_TEXT, 'utf16le'))).toBe(LIST_TEXT.replaceAll('\r', ''));
    expect(decodeWslOutput(Buffer.concat([Buffer.from([0xff, 0xfe]), Buffer.from('hi\r\n', 'utf16le')]))).toBe('hi\n');
    expect(decodeWslOutput(Buffer.from('héllo\r\n', 'utf8'))).toBe('héllo\n');
  });

  it('parses wsl --list --verbose', () => {
    expect(parseWslList(Buffer.from(LIST_TEXT, 'utf16le'))).toEqual([
      { name: 'Ubuntu', state: 'Running', version: 2, isDefault: true },
      { name: 'airlock-r-abc-12345678', state: 'Stopped', version: 2, isDefault: false },
      { name: 'Legacy', state: 'Stopped', version: 1, isDefault: false },
    ]);
    expect(parseWslList('')).toEqual([]);
  });

  it('recognises the documented error codes', () => {
    expect(isDistroNotFound('There is no distribution with the supplied name.\nError code: Wsl/Service/WSL_E_DISTRO_NOT_FOUND')).toBe(true);
    expect(isDistroNotFound('The operation completed successfully.')).toBe(false);
    expect(isNoDistributions('Windows Subsystem for Linux has no installed distributions.\nError code: Wsl/WSL_E_DEFAULT_DISTRO_NOT_FOUND')).toBe(true);
  });

  it('imports as WSL 2 and unregisters by name', () => {
    expect(wslImportArgs('airlock-r-1', 'C:\\Users\\dev\\AppData\\Roaming\\Airlock\\wsl\\r-1', 'C:\\rootfs.tar')).toEqual(['--import', 'airlock-r-1', 'C:\\Users\\dev\\AppData\\Roaming\\Airlock\\wsl\\r-1', 'C:\\rootfs.tar', '--version', '2']);
    expect(wslUnregisterArgs('airlock-r-1')).toEqual(['--unregister', 'airlock-r-1']);
  });

  it('starts the helper in its own network namespace as root with only its four capabilities, commands as the non-root user, with no shell parsing by wsl.exe', () => {
    const args = wslHelperArgs('airlock-r-1', { uid: 1000, gid: 1000, home: '/home/airlock', pids: 256 });
    expect(args.slice(0, 9)).toEqual(['--distribution', 'airlock-r-1', '--user', 'root', '--cd', '/', '--exec', '/bin/sh', '-c']);
    const script = wslHelperScript({ uid: 1000, gid: 1000, home: '/home/airlock', pids: 256 });
    expect(script).toMatch(/^exec unshare --net --mount --propagation private --fork -- \/bin\/sh -c '/);
    // The image's own ip (iproute2) brings lo up: the rootfs the app makes needs no extra busybox.
    expect(script).toContain('(ip link set lo up || /opt/airlock-vm/busybox ip link set lo up)');
    for (const p of ['/mnt/wsl', '/mnt/wslg', '/tmp/.X11-unix', '/usr/lib/wsl']) expect(script).toContain(`if [ -d ${p} ]; then mount -t tmpfs -o ro,nosuid,nodev,noexec,size=4k airlock-masked ${p} || exit 1; fi`);
    expect(script).toContain('mount --bind /dev/null /dev/dxg');
    // The helper split as resources/vm/guest-init.sh starts the VM's helper: uid 0 kept, only SETUID, SETGID and KILL
    // left (never DAC_READ_SEARCH), nothing inheritable, no groups, no_new_privs; its clean environment names the agent's user.
    expect(script).toContain(
      'exec prlimit --nproc=256:256 -- setpriv --clear-groups --no-new-privs --inh-caps=-all --bounding-set=-all,+setuid,+setgid,+kill ' +
        'env -i AIRLOCK_AGENT_USER=1000:1000 HOME=/home/airlock PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin LANG=C.UTF-8 /opt/airlock/lib/ld.so --inhibit-cache --library-path /opt/airlock/lib /opt/airlock/node/node --openssl-config=/dev/null /opt/airlock/helper.js',
    );
    expect(script).not.toMatch(/--reuid|--regid|--init-groups/);
    // Airlock's own loader and Node by absolute path, never a `node` from the distribution's PATH.
    expect(script).toMatch(/ \/opt\/airlock\/lib\/ld\.so --inhibit-cache --library-path \/opt\/airlock\/lib \/opt\/airlock\/node\/node --openssl-config=\/dev\/null \/opt\/airlock\/helper\.js'$/);
    expect(script).not.toMatch(/ node /);
  });
});
