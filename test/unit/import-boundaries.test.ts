import { mkdir, rm, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

const root = fileURLToPath(new URL('../..', import.meta.url));
// @ts-expect-error plain ESM script without types
const { findViolations } = (await import('../../scripts/check-boundaries.mjs')) as { findViolations(): Promise<string[]> };

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
});
