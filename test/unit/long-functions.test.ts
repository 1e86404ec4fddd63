import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { describe, expect, it } from 'vitest';

// @ts-expect-error plain ESM script without types
const { findLongFunctions } = (await import('../../scripts/long-functions.mjs')) as {
  findLongFunctions: (root: string, max?: number) => Promise<Array<{ file: string; line: number; name: string; lines: number }>>;
};

const body = (n: number) => Array.from({ length: n }, (_, i) => `  const v${i} = ${i};`).join('\n');

describe('long functions report (docs/architecture.md §3)', () => {
  it('lists functions, methods and arrows over the limit in core/ and main/, longest first, tests aside', async () => {
    const dir = await mkdtemp(path.join(os.tmpdir(), 'airlock-long-'));
    try {
      await mkdir(path.join(dir, 'core', 'x'), { recursive: true });
      await mkdir(path.join(dir, 'main'), { recursive: true });
      // 1 + 101 + 1 = 103 lines; 1 + 97 + 1 = 99 lines.
      await writeFile(path.join(dir, 'core', 'x', 'long.ts'), `export function tooLong() {\n${body(101)}\n}\nexport function fine() {\n${body(97)}\n}\n`);
      await writeFile(path.join(dir, 'core', 'x', 'long.test.ts'), `export function inATest() {\n${body(200)}\n}\n`);
      await writeFile(path.join(dir, 'main', 'win.ts'), `export class Win {\n  open() {\n${body(150)}\n  }\n}\nexport const arrow = () => {\n${body(120)}\n};\n`);
      const found = await findLongFunctions(dir, 100);
      expect(found.map((f) => [f.file, f.name, f.lines])).toEqual([
        ['main/win.ts', 'Win.open', 152],
        ['main/win.ts', 'arrow', 122],
        ['core/x/long.ts', 'tooLong', 103],
      ]);
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });
});
