import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { describe, expect, it } from 'vitest';

// @ts-expect-error plain ESM script without types
const { findBrokenCitations } = (await import('../../scripts/check-doc-citations.mjs')) as {
  findBrokenCitations: (root?: string) => Promise<string[]>;
};

// Spelled so that this file's own fixtures are not citations the whole-tree check reads.
const DOC_PATH = ['docs/architecture', 'md'].join('.');

const DOC = [
  '# Doc',
  '## 1. The run',
  '**Crash recovery.** Runs left behind are marked.',
  '## 2. Trust boundaries',
  '### 2.3 Hardened by default',
  '**No way back to the host** (issue 35).',
  '### Image architecture',
  '- *Apply: only the reviewed bytes.* Text, as §2.3, "No way back to the host" says.',
  '',
].join('\n');

/** A throwaway tree with the doc above and `files` (path → text) citing it. */
async function fixture(files: Record<string, string>): Promise<string> {
  const dir = await mkdtemp(path.join(os.tmpdir(), 'airlock-citations-'));
  await mkdir(path.join(dir, 'docs'), { recursive: true });
  await writeFile(path.join(dir, 'docs', 'architecture.md'), DOC);
  for (const [file, text] of Object.entries(files)) {
    await mkdir(path.dirname(path.join(dir, file)), { recursive: true });
    await writeFile(path.join(dir, file), text);
  }
  return dir;
}

describe('docs/architecture.md citations (docs/architecture.md §10)', () => {
  it('resolve for the whole tree', async () => {
    expect(await findBrokenCitations()).toEqual([]);
  });

  it('accept sections, headings, paragraph labels and citations wrapped over comment lines', async () => {
    const dir = await fixture({
      'core/a.ts': [
        `// see ${DOC_PATH} §1, "Crash recovery"; and ${DOC_PATH} §2.3`,
        '/**',
        ` * The helper (${DOC_PATH} §2.3, "No way`,
        ` * back to the host") and ${DOC_PATH} §2 "Image architecture", ${DOC_PATH} §2, "Apply".`,
        ' */',
      ].join('\n'),
      'README.md': `Details: [\`${DOC_PATH}\`](${DOC_PATH}) §2.3.\n`,
    });
    try {
      expect(await findBrokenCitations(dir)).toEqual([]);
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });

  it('report a missing section, and a heading not in the cited section (from code or from the document itself)', async () => {
    const dir = await fixture({
      'core/b.ts': `// ${DOC_PATH} §7 and ${DOC_PATH} §1, "No way back to the host"\n`,
      'scripts/c.sh': `# ${DOC_PATH} §2.4\n`,
    });
    await writeFile(path.join(dir, 'docs', 'architecture.md'), `${DOC}See §1, "Image architecture".\n`);
    try {
      const broken = await findBrokenCitations(dir);
      expect(broken).toHaveLength(4);
      expect(broken.join('\n')).toContain(`core/b.ts: §7: ${DOC_PATH} has no section 7`);
      expect(broken.join('\n')).toContain('core/b.ts: §1 "No way back to the host": no heading or paragraph label');
      expect(broken.join('\n')).toContain(`scripts/c.sh: §2.4: ${DOC_PATH} has no section 2.4`);
      expect(broken.join('\n')).toContain(`${DOC_PATH}: §1 "Image architecture": no heading or paragraph label`);
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });
});
