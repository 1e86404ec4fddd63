/**
 * RECORDED-BEHAVIOUR TESTS (no Windows here): the WSL driver against a stand-in wsl.exe that answers
 * with the texts and exit codes the real one prints, taken from microsoft/WSL at the commit noted in
 * resources/vm/README.md: localization/strings/de-DE/Resources.resw (MessageNoDefaultDistro,
 * MessageDistroNotFound, MessageErrorCode), src/windows/common/WslClient.cpp (no code printed for
 * WSL_E_DEFAULT_DISTRO_NOT_FOUND; exit -1 on failure), src/windows/common/wslutil.cpp ErrorToString
 * (the code as `Wsl/Service/WSL_E_…`).
 */
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import type { ToolResult } from '../../common/run-tool';
import { wslDataDir, WslDriver } from './wsl-driver';

const GERMAN_NO_DISTROS =
  "Windows-Subsystem für Linux verfügt über keine installierten Distributionen.\r\nSie können dies beheben, indem Sie eine Distribution mit den folgenden Anweisungen installieren:\r\n\r\nVerwenden Sie 'wsl.exe --list --online', um verfügbare Distributionen aufzulisten,\r\nund 'wsl.exe --install <Distro>' zum Installieren.\r\n";
const GERMAN_NOT_FOUND = 'Es ist keine Distribution mit dem angegebenen Namen vorhanden.\r\nFehlercode: Wsl/Service/WSL_E_DISTRO_NOT_FOUND\r\n';

/** wsl.exe prints its own messages in UTF-16LE (WSL_UTF8 is not honoured by every release). */
const res = (text: string, code: number): ToolResult => ({ code, signal: null, stdout: Buffer.from(text, 'utf16le'), stderr: '' });

describe('WslDriver (recorded behaviour, not run on Windows)', () => {
  const dirs: string[] = [];
  afterAll(() => Promise.all(dirs.map((d) => rm(d, { recursive: true, force: true }))));

  it('verifies the wipe of the last distribution on a non-English Windows (no error code to match)', async () => {
    const dir = await mkdtemp(path.join(os.tmpdir(), 'airlock-wsl-driver-'));
    dirs.push(dir);
    const rootfsTar = path.join(dir, 'rootfs.tar');
    await writeFile(rootfsTar, 'tar');
    const registered = new Set<string>();
    const calls: string[][] = [];
    const runner = async (args: string[]): Promise<ToolResult> => {
      calls.push(args);
      const [cmd, name] = args;
      if (cmd === '--import') {
        registered.add(name as string);
        return res('Der Vorgang wurde erfolgreich beendet.\r\n', 0);
      }
      if (cmd === '--terminate') return res('', 0);
      if (cmd === '--unregister') {
        registered.delete(name as string);
        return res('Registrierung wird aufgehoben.\r\nDer Vorgang wurde erfolgreich beendet.\r\n', 0);
      }
      if (cmd === '--list') {
        if (registered.size === 0) return res(GERMAN_NO_DISTROS, -1);
        return res(`  NAME            STATUS          VERSION\r\n${[...registered].map((n) => `  ${n}   Beendet   2\r\n`).join('')}`, 0);
      }
      if (cmd === '--distribution' && args[2] === '--exec') return registered.has(name as string) ? res('', 0) : res(GERMAN_NOT_FOUND, -1);
      return res('Ungültiger Befehl', -1);
    };
    const driver = new WslDriver({ env: process.env, rootfsTar, distrosDir: path.join(dir, 'distros'), runner });
    await driver.create({ runId: 'r-wsl-1', image: 'x', limits: { memoryBytes: 1 << 30, cpus: 1, pids: 128 }, network: 'none' });
    const proof = await driver.destroy('r-wsl-1');
    expect(proof.leftovers).toEqual([]);
    expect(proof.removed).toContain('distribution:airlock-r-wsl-1');
    // It confirmed the localized "none installed" by asking for the distribution itself.
    expect(calls).toContainEqual(['--distribution', 'airlock-r-wsl-1', '--exec', '/bin/true']);
  });

  it('keeps its large files under Local AppData, not the roaming profile', () => {
    expect(wslDataDir({ LOCALAPPDATA: 'C:\\Users\\dev\\AppData\\Local', APPDATA: 'C:\\Users\\dev\\AppData\\Roaming' })).toBe('C:\\Users\\dev\\AppData\\Local\\Airlock\\wsl');
    expect(wslDataDir({ AIRLOCK_HOME: '/tmp/h', LOCALAPPDATA: 'C:\\L' })).toBe(path.join('/tmp/h', 'wsl'));
  });
});
