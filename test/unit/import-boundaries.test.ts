import { mkdir, rm, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

const root = fileURLToPath(new URL('../..', import.meta.url));
// @ts-expect-error plain ESM script without types
const { findViolations, findImportCycles } = (await import('../../scripts/check-boundaries.mjs')) as { findViolations(): Promise<string[]>; findImportCycles(): Promise<string[]> };

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
});
