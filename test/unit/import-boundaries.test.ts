import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

const root = fileURLToPath(new URL('../..', import.meta.url));
// @ts-expect-error plain ESM script without types
const { findViolations, findImportCycles, findFolderViolations, findResourceViolations, findAmbientReads, findBareCatches } = (await import('../../scripts/check-boundaries.mjs')) as Record<
  'findViolations' | 'findImportCycles' | 'findFolderViolations' | 'findResourceViolations',
  (root?: string) => Promise<string[]>
> & Record<'findAmbientReads' | 'findBareCatches', (root?: string, baseline?: Record<string, number>) => Promise<string[]>>;

/** A throwaway tree of `files` (path → text) to run the checker on. */
async function fixture(files: Record<string, string>): Promise<string> {
  const dir = await mkdtemp(path.join(os.tmpdir(), 'airlock-boundaries-'));
  for (const [file, text] of Object.entries(files)) {
    await mkdir(path.dirname(path.join(dir, file)), { recursive: true });
    await writeFile(path.join(dir, file), text);
  }
  return dir;
}

describe('no ambient state below the composition root (docs/architecture.md §5)', () => {
  it('holds for the whole tree (within scripts/ambient-baseline.json)', async () => {
    expect(await findAmbientReads()).toEqual([]);
  });

  it('a new process.env, airlockHome() or connectEngine() in core/ fails, naming the file and what to do', async () => {
    const dir = await fixture({
      'core/store/new-store.ts': "import { airlockHome } from '../common/paths';\nexport const home = (h?: string) => h ?? airlockHome();\n",
      'core/net/proxy.ts': '// process.env is read by the root only\nexport const port = Number(process.env.PORT);\n',
      'core/sandbox/old.ts': 'export const a = process.env.A;\nexport const b = process.env.B;\n',
      'core/sandbox/old.test.ts': 'export const c = process.env.C;\n',
      'core/cli/entry.ts': 'export const d = process.env.D;\n',
    });
    try {
      const v = await findAmbientReads(dir, { 'core/sandbox/old.ts': 1 });
      expect(v).toHaveLength(3);
      expect(v.find((l) => l.startsWith('core/store/new-store.ts'))).toMatch(/airlockHome\(\).*1 time\(s\), 0 allowed.*AppContext.*add a parameter, do not default it/);
      expect(v.find((l) => l.startsWith('core/net/proxy.ts'))).toContain('process.env');
      expect(v.find((l) => l.startsWith('core/sandbox/old.ts'))).toContain('2 time(s), 1 allowed');
      expect(await findAmbientReads(dir, { 'core/sandbox/old.ts': 2, 'core/net/proxy.ts': 1, 'core/store/new-store.ts': 1 })).toEqual([]);
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });

  it("the context's own engine method is not ambient; a bare connectEngine() is, and a marked sandbox-side line is not", async () => {
    const dir = await fixture({
      'core/doctor/check.ts': 'export interface Ctx { connectEngine(): Promise<unknown> }\nexport const e = (app: Ctx) => app.connectEngine();\n',
      'core/sandbox/bare.ts': "import { connectEngine } from './docker/engine';\nexport const e = () => connectEngine();\n",
      'core/workspace/script.ts': 'export const JS = `const env = { ...process.env }; // ambient-ok: runs in the sandbox\n`;\n',
    });
    try {
      const v = await findAmbientReads(dir, {});
      expect(v).toHaveLength(1);
      expect(v[0]).toMatch(/^core\/sandbox\/bare\.ts: .*connectEngine\(\)/);
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });
});

describe('no error swallowed without a word in core/ (docs/architecture.md §5)', () => {
  it('holds for the whole tree (within scripts/bare-catch-baseline.json)', async () => {
    expect(await findBareCatches()).toEqual([]);
  });

  it('a bare .catch(() => undefined) or empty catch {} fails; the debug sink or a comment saying why passes', async () => {
    const dir = await fixture({
      'core/sandbox/bare.ts': 'export const a = (p: Promise<void>) => p.catch(() => undefined);\nexport function b() {\n  try { JSON.parse(\'x\'); } catch {}\n}\n',
      'core/sandbox/said.ts':
        "import { debugLog } from '../common/debug-log';\nexport const a = (p: Promise<void>) => p.catch(debugLog.swallow('a'));\nexport const b = (p: Promise<void>) => p.catch(() => undefined); // the file may not exist\n// awaited later: this only keeps the rejection handled\nexport const c = (p: Promise<void>) => p.catch(() => false);\n",
      'core/sandbox/bare.test.ts': 'export const t = (p: Promise<void>) => p.catch(() => undefined);\n',
    });
    try {
      const v = await findBareCatches(dir, {});
      expect(v).toHaveLength(1);
      expect(v[0]).toMatch(/^core\/sandbox\/bare\.ts: swallows 2 error\(s\) without a word, 0 allowed.*debugLog\.swallow/);
      expect(await findBareCatches(dir, { 'core/sandbox/bare.ts': 2 })).toEqual([]);
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });
});

describe('import boundaries (docs/architecture.md §3)', () => {
  it('holds for the whole tree', async () => {
    expect(await findViolations()).toEqual([]);
  });

  it('fails when core/ imports electron', async () => {
    const dir = path.join(root, 'core', '__boundary_probe__');
    await mkdir(dir, { recursive: true });
    try {
      await writeFile(path.join(dir, 'probe.ts'), "import { app } from 'electron';\nexport const x = app;\n");
      const v = await findViolations();
      expect(v.some((line) => line.includes('__boundary_probe__') && line.includes("'electron'"))).toBe(true);
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });

  it('finds no import cycle among core\'s modules', async () => {
    expect(await findImportCycles()).toEqual([]);
  });

  it('finds a cycle when two core modules import each other (type-only imports aside)', async () => {
    const dir = path.join(root, 'core', '__cycle_probe__');
    await mkdir(dir, { recursive: true });
    try {
      await writeFile(path.join(dir, 'a.ts'), "import { b } from './b';\nexport const a = () => b;\n");
      await writeFile(path.join(dir, 'b.ts'), "import { a } from './a';\nexport const b = () => a;\n");
      await writeFile(path.join(dir, 'c.ts'), "import type { d } from './d';\nexport const c = (x: typeof d) => x;\n");
      await writeFile(path.join(dir, 'd.ts'), "import { c } from './c';\nexport const d = c;\n");
      const cycles = await findImportCycles();
      expect(cycles.filter((c) => c.includes('__cycle_probe__'))).toEqual(['core/__cycle_probe__/a.ts → core/__cycle_probe__/b.ts → core/__cycle_probe__/a.ts']);
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });

  it("core's folders follow the declared order, with no cycle between them, and in-sandbox code imports only the wire protocol", async () => {
    expect(await findFolderViolations()).toEqual([]);
    expect(await findResourceViolations()).toEqual([]);
  });

  it('fails on a cycle between two folders (an import against the order, and the cycle named with the imports that make it)', async () => {
    const dir = await fixture({
      'core/keys/vault.ts': "import { relay } from '../proxy/relay';\nexport const vault = () => relay;\n",
      'core/proxy/relay.ts': "import { vault } from '../keys/vault';\nexport const relay = () => vault;\n",
      // Type-only imports are erased: they make no edge.
      'core/keys/types.ts': "import type { relay } from '../proxy/relay';\nexport type R = typeof relay;\n",
    });
    try {
      const v = await findFolderViolations(dir);
      expect(v).toContain("core/keys/vault.ts: core/keys/ may not import '../proxy/relay' (core/proxy/ comes after core/keys/ in the folder order)");
      expect(v).toContain("folder cycle in core: keys → proxy → keys (core/keys/vault.ts: import '../proxy/relay'; core/proxy/relay.ts: import '../keys/vault')");
      expect(v.filter((l) => l.includes('types.ts'))).toEqual([]);
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });

  it('fails on a lazy import against the order and on a folder with no place in it', async () => {
    const dir = await fixture({
      'core/doctor/check.ts': "export async function check() { return (await import('../app')).x; }\n",
      'core/app.ts': 'export const x = 1;\n',
      'core/gadgets/thing.ts': 'export const t = 1;\n',
    });
    try {
      const v = await findFolderViolations(dir);
      expect(v.some((l) => l.startsWith("core/doctor/check.ts: core/doctor/ may not import '../app'"))).toBe(true);
      expect(v.some((l) => l.startsWith('core/gadgets/thing.ts: core/gadgets/ has no place in the folder order'))).toBe(true);
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });

  it('fails when in-sandbox code imports keys, even for a type, or an allowed file reaches further', async () => {
    const dir = await fixture({
      'resources/sandbox/helper/main.ts': "import { FrameType } from '../../../core/channel/protocol';\nimport type { Secret } from '../../../core/keys/secret';\nexport const f = FrameType;\nexport type S = Secret;\n",
      'resources/sandbox/agent/run.ts': "import { KeyVault } from '../../../core/keys/key-vault';\nexport const k = KeyVault;\n",
      'core/channel/protocol.ts': "import { runs } from '../runs/run-store';\nexport const FrameType = runs;\n",
      'core/keys/secret.ts': 'export class Secret {}\n',
      'core/keys/key-vault.ts': 'export class KeyVault {}\n',
      'core/runs/run-store.ts': 'export const runs = 1;\n',
    });
    try {
      const v = await findResourceViolations(dir);
      expect([...v].sort()).toEqual([
        expect.stringMatching(/^core\/channel\/protocol\.ts: in-sandbox code may not import '\.\.\/runs\/run-store'/),
        expect.stringMatching(/^resources\/sandbox\/agent\/run\.ts: in-sandbox code may not import '\.\.\/\.\.\/\.\.\/core\/keys\/key-vault'/),
        expect.stringMatching(/^resources\/sandbox\/helper\/main\.ts: in-sandbox code may not import '\.\.\/\.\.\/\.\.\/core\/keys\/secret'/),
      ]);
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });
});
