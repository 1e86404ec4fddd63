#!/usr/bin/env node
// Lists functions longer than a limit (default 100 lines) in core/ and main/, longest first, with the
// TypeScript compiler's own parser (every function form: declarations, methods, arrows, function
// expressions). A report, not a gate: `npm run lint` prints it so a long function is seen when it
// grows (issue 39: split them along what they do). `--max N` changes the limit.
import { readdir, readFile } from 'node:fs/promises';
import path from 'node:path';
import ts from 'typescript';

const repoRoot = path.resolve(path.dirname(new URL(import.meta.url).pathname), '..');

async function sources(root, dir) {
  const out = [];
  let entries;
  try {
    entries = await readdir(path.join(root, dir), { withFileTypes: true });
  } catch {
    return out; // a folder that is not there has no functions
  }
  for (const e of entries) {
    const rel = path.join(dir, e.name);
    if (e.isDirectory()) {
      if (e.name !== 'node_modules') out.push(...(await sources(root, rel)));
    } else if (/\.tsx?$/.test(e.name) && !/\.(test|d)\.tsx?$/.test(e.name)) out.push(rel);
  }
  return out;
}

/** A function's name as a reader would search for it: `Class.method`, `name`, or `(anonymous)`. */
function nameOf(node) {
  const own = node.name && ts.isIdentifier(node.name) ? node.name.text : node.name && ts.isStringLiteral(node.name) ? node.name.text : undefined;
  if (own && (ts.isMethodDeclaration(node) || ts.isGetAccessor(node) || ts.isSetAccessor(node) || ts.isConstructorDeclaration(node))) {
    const cls = node.parent && ts.isClassLike(node.parent) && node.parent.name ? `${node.parent.name.text}.` : '';
    return `${cls}${own}`;
  }
  if (ts.isConstructorDeclaration(node)) return `${node.parent?.name?.text ?? '(class)'}.constructor`;
  if (own) return own;
  const p = node.parent;
  if (p && ts.isVariableDeclaration(p) && ts.isIdentifier(p.name)) return p.name.text;
  if (p && ts.isPropertyAssignment(p) && (ts.isIdentifier(p.name) || ts.isStringLiteral(p.name))) return p.name.text;
  if (p && ts.isPropertyDeclaration(p) && ts.isIdentifier(p.name)) return p.name.text;
  return '(anonymous)';
}

/** Every function over `max` lines in core/ and main/ (tests aside), longest first. */
export async function findLongFunctions(root = repoRoot, max = 100) {
  const found = [];
  for (const dir of ['core', 'main']) {
    for (const file of await sources(root, dir)) {
      const text = await readFile(path.join(root, file), 'utf8');
      const sf = ts.createSourceFile(file, text, ts.ScriptTarget.Latest, true, file.endsWith('.tsx') ? ts.ScriptKind.TSX : ts.ScriptKind.TS);
      const visit = (node) => {
        if (ts.isFunctionLike(node) && 'body' in node && node.body) {
          const start = sf.getLineAndCharacterOfPosition(node.getStart(sf)).line;
          const end = sf.getLineAndCharacterOfPosition(node.getEnd()).line;
          const lines = end - start + 1;
          if (lines > max) found.push({ file: file.split(path.sep).join('/'), line: start + 1, name: nameOf(node), lines });
        }
        ts.forEachChild(node, visit);
      };
      visit(sf);
    }
  }
  return found.sort((a, b) => b.lines - a.lines);
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const i = process.argv.indexOf('--max');
  const max = i > 0 ? Number(process.argv[i + 1]) : 100;
  const long = await findLongFunctions(repoRoot, max);
  for (const f of long) console.log(`${String(f.lines).padStart(4)}  ${f.file}:${f.line}  ${f.name}`);
  console.log(`${long.length} function(s) over ${max} lines in core/ and main/ (a report; split them along what they do)`);
}
