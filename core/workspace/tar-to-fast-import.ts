/**
 * A tiny Node program, run inside the sandbox (`node -e`), that turns the project tar stream into a
 * `git fast-import` stream committing the baseline. With it the project crosses the channel once:
 * `tee` feeds the same bytes to `tar -x` and to this converter. Plain CommonJS, no dependencies,
 * Node 18+. Understands ustar, PAX (`x`) and GNU long names (`L`/`K`).
 * `TAR_TO_FAST_IMPORT_FN` defines `tarToFastImport(input, out, ref, ident, baseTree, deletions, done)`;
 * with a tree id and paths, the commit starts from that tree and deletes those paths before the
 * streamed files: a run started from a project base (hydrate-base.ts) streams only what differs from
 * it. `done(error?)` is called once the last line is written (the caller ends `out`).
 */
export const TAR_TO_FAST_IMPORT_FN = String.raw`
function tarToFastImport(input, out, ref, ident, baseTree, deletions, done) {
let buf = Buffer.alloc(0), state = 'header', remain = 0, pad = 0, cur = null, pax = {}, longName = null, longLink = null, marks = [], zeroBlocks = 0;
let paused = false;
function write(b) { if (!out.write(b) && !paused) { paused = true; input.pause(); out.once('drain', () => { paused = false; input.resume(); }); } }
function str(b, s, n) { const x = b.subarray(s, s + n); const z = x.indexOf(0); return (z < 0 ? x : x.subarray(0, z)).toString('utf8'); }
function num(b, s, n) { if (b[s] & 0x80) { let v = 0; for (let i = s + 1; i < s + n; i++) v = v * 256 + b[i]; return v; } const t = str(b, s, n).trim(); return t ? parseInt(t, 8) : 0; }
function quote(p) { let o = '"'; for (const ch of p) { const c = ch.codePointAt(0); if (ch === '"') o += '\\"'; else if (ch === '\\') o += '\\\\'; else if (ch === '\n') o += '\\n'; else if (ch === '\t') o += '\\t'; else if (c < 32 || c === 127) o += '\\' + c.toString(8).padStart(3, '0'); else o += ch; } return o + '"'; }
function parsePax(b) { const r = {}; let i = 0; while (i < b.length) { const sp = b.indexOf(32, i); if (sp < 0) break; const len = parseInt(b.subarray(i, sp).toString(), 10); if (!len) break; const rec = b.subarray(sp + 1, i + len - 1).toString('utf8'); const eq = rec.indexOf('='); r[rec.slice(0, eq)] = rec.slice(eq + 1); i += len; } return r; }
function header(h) {
  if (h.every((x) => x === 0)) { zeroBlocks++; return; }
  let name = str(h, 0, 100); const prefix = str(h, 345, 155); if (prefix && str(h, 257, 6).startsWith('ustar')) name = prefix + '/' + name;
  const type = String.fromCharCode(h[156] || 48); let size = num(h, 124, 12); const mode = num(h, 100, 8); let link = str(h, 157, 100);
  if (type === 'x' || type === 'L' || type === 'K' || type === 'g') { cur = { meta: type, data: [] }; remain = size; pad = (512 - (size % 512)) % 512; state = remain ? 'body' : 'header'; if (!remain) endBody(); return; }
  if (pax.path !== undefined) name = pax.path; if (longName !== null) name = longName; if (pax.linkpath !== undefined) link = pax.linkpath; if (longLink !== null) link = longLink; if (pax.size !== undefined) size = parseInt(pax.size, 10);
  pax = {}; longName = null; longLink = null;
  name = name.replace(/^\.\//, '').replace(/\/$/, '');
  if (type === '0' || type === '\0' || type === '7') {
    const mark = marks.length + 1; marks.push([mark, (mode & 0o100) ? '100755' : '100644', name]);
    write(Buffer.from('blob\nmark :' + mark + '\ndata ' + size + '\n')); cur = { meta: null }; remain = size; pad = (512 - (size % 512)) % 512; state = remain ? 'body' : 'header'; if (!remain) endBody();
  } else if (type === '2') {
    const mark = marks.length + 1; marks.push([mark, '120000', name]); const t = Buffer.from(link); write(Buffer.from('blob\nmark :' + mark + '\ndata ' + t.length + '\n')); write(t); write(Buffer.from('\n'));
  } else { cur = { meta: 'skip' }; remain = size; pad = (512 - (size % 512)) % 512; state = remain ? 'body' : 'header'; }
}
function endBody() {
  if (cur && cur.meta === null) write(Buffer.from('\n'));
  else if (cur && cur.meta) { const d = Buffer.concat(cur.data); if (cur.meta === 'x') pax = parsePax(d); else if (cur.meta === 'L') longName = str(d, 0, d.length); else if (cur.meta === 'K') longLink = str(d, 0, d.length); }
  cur = null;
}
input.on('data', (chunk) => {
  buf = buf.length ? Buffer.concat([buf, chunk]) : chunk;
  let off = 0;
  for (;;) {
    if (state === 'header') { if (buf.length - off < 512) break; header(buf.subarray(off, off + 512)); off += 512; }
    else if (state === 'body') { const n = Math.min(remain, buf.length - off); if (!n) break; const part = buf.subarray(off, off + n); if (cur.meta === null) write(part); else if (cur.meta !== 'skip') cur.data.push(Buffer.from(part)); off += n; remain -= n; if (!remain) { endBody(); state = pad ? 'pad' : 'header'; } }
    else { const n = Math.min(pad, buf.length - off); if (!n) break; off += n; pad -= n; if (!pad) state = 'header'; }
  }
  buf = buf.subarray(off);
});
input.on('end', () => {
  if (state !== 'header' || zeroBlocks < 2) { done('truncated tar stream'); return; }
  const lines = ['commit ' + ref, 'author ' + ident, 'committer ' + ident, 'data 17', 'airlock baseline'];
  if (baseTree) lines.push('M 040000 ' + baseTree + ' ""');
  for (const p of deletions) if (p) lines.push('D ' + quote(p));
  for (const [mark, mode, name] of marks) lines.push('M ' + mode + ' :' + mark + ' ' + quote(name));
  lines.push('', 'done', '');
  out.write(lines.join('\n'));
  done();
});
}
`;

/** The converter as a program: the tar on stdin, the import stream on stdout (`node -e JS ref ident`). */
export const TAR_TO_FAST_IMPORT_JS = `${TAR_TO_FAST_IMPORT_FN}
tarToFastImport(process.stdin, process.stdout, process.argv[1], process.argv[2], '', [], (err) => { if (err) { process.stderr.write(err + '\\n'); process.exit(2); } });
`;
