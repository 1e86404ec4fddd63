// Every `docs/architecture.md §N` citation in the repository names a section that exists, and every
// `§N "Heading"` (or `§N, "Heading"`) names a heading or a bold/italic paragraph label inside that
// section (docs/architecture.md §10). Citations wrapped over comment lines are joined first.
import { readdir, readFile } from 'node:fs/promises';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const repoRoot = fileURLToPath(new URL('..', import.meta.url));
const DOC = path.join('docs', 'architecture.md');
const SKIP = new Set(['node_modules', 'out', 'dist', '.git', 'release']);
const EXT = /\.(ts|tsx|mts|mjs|cjs|js|sh|md|yml|yaml|json)$/;

async function* walk(root, dir = '') {
  for (const entry of await readdir(path.join(root, dir), { withFileTypes: true })) {
    if (SKIP.has(entry.name) || entry.name.startsWith('.')) continue;
    const rel = path.join(dir, entry.name);
    if (entry.isDirectory()) yield* walk(root, rel);
    else if (EXT.test(entry.name)) yield rel;
  }
}

const norm = (s) => s.replace(/[`*]/g, '').replace(/\s+/g, ' ').trim().replace(/[.:,;]+$/, '').toLowerCase();

/** Section number → the set of labels (headings, bold/italic paragraph openers) inside it. */
export function sectionsOf(doc) {
  const sections = new Map();
  let top = null;
  let sub = null;
  const add = (label) => {
    // A label with a subtitle ("Apply: only the reviewed bytes") is cited by its head as well.
    const names = [norm(label), norm(label.split(':')[0])];
    for (const s of [top, sub]) if (s) for (const n of names) sections.get(s).add(n);
  };
  for (const line of doc.split('\n')) {
    const h = /^(#{2,4})\s+(?:(\d+(?:\.\d+)?)\.?\s+)?(.*)$/.exec(line);
    if (h) {
      const [, hashes, num, title] = h;
      if (hashes === '##' && num) {
        top = num;
        sub = null;
        sections.set(num, new Set());
      } else if (hashes === '###' && num && num.includes('.')) {
        sub = num;
        sections.set(num, new Set());
      } else if (hashes === '###') sub = null;
      add(title);
      continue;
    }
    // A paragraph or list item that opens with a bold or italic label: **Label.** / *Label* / - **Label**
    const label = /^\s*(?:[-*]\s+|\|\s*)?(\*\*|\*|_)([^*_]{2,100}?)\1/.exec(line);
    if (label) add(label[2]);
  }
  return sections;
}

/** Every citation of the doc in `text` (comment leaders removed, lines joined). */
export function citationsIn(text) {
  const joined = text
    .split('\n')
    .map((l) => l.replace(/^\s*(?:\/\/+|\/\*+|\*+\/?|#+(?!#)|<!--|-->)\s?/, ''))
    .join(' ');
  const out = [];
  const re = /architecture\.md(?:\]\([^)]*\))?`?\)?,?\s*§\s?(\d+(?:\.\d+)?)(?![\d])(?:,?\s*\(?\s*(?:"([^"]{1,90})"|“([^”]{1,90})”))?/g;
  for (const m of joined.matchAll(re)) out.push({ section: m[1], heading: m[2] ?? m[3] });
  return out;
}

/** Citations that do not resolve, as `file: §N "Heading": why` lines. */
export async function findBrokenCitations(root = repoRoot) {
  const doc = await readFile(path.join(root, DOC), 'utf8');
  const sections = sectionsOf(doc);
  const broken = [];
  // The document's own cross-references (`§16, "Setup ends completely"`) hold to the same rule.
  for (const m of doc.replace(/\s+/g, ' ').matchAll(/§(\d+(?:\.\d+)?),? "([^"]{1,90})"/g)) {
    const labels = sections.get(m[1]);
    if (!labels) broken.push(`${DOC}: §${m[1]} "${m[2]}": no section ${m[1]}`);
    else if (!labels.has(norm(m[2]))) broken.push(`${DOC}: §${m[1]} "${m[2]}": no heading or paragraph label "${m[2]}" in that section`);
  }
  for await (const file of walk(root)) {
    if (file === DOC) continue;
    const text = await readFile(path.join(root, file), 'utf8');
    if (!text.includes('architecture.md')) continue;
    for (const c of citationsIn(text)) {
      const labels = sections.get(c.section);
      const cited = c.heading ? `§${c.section} "${c.heading}"` : `§${c.section}`;
      if (!labels) broken.push(`${file}: ${cited}: docs/architecture.md has no section ${c.section}`);
      else if (c.heading && !labels.has(norm(c.heading))) broken.push(`${file}: ${cited}: no heading or paragraph label "${c.heading}" in that section`);
    }
  }
  return broken;
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const broken = await findBrokenCitations();
  for (const line of broken) console.error(line);
  console.log(broken.length ? `${broken.length} broken docs/architecture.md citation(s)` : 'architecture.md citations: ok');
  process.exitCode = broken.length ? 1 : 0;
}
