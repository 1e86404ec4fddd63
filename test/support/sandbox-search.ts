/**
 * Runs inside the sandbox as the sandbox user: `node -e SEARCH_SCRIPT <envControl> <fileControl>
 * <canary>…` searches every process's environ and cmdline and every file on the sandbox's own mounts,
 * and prints `{hits, control, …}` as JSON. Needles arrive XOR-encoded so a canary itself is never put
 * into the sandbox by the test (not even in this process's argv); the controls must be found, so a
 * search that could not run fails instead of passing.
 */
export const SEARCH_SCRIPT = `
const fs = require('fs'), path = require('path');
const dec = (h) => Buffer.from(Buffer.from(h, 'hex').map((b) => b ^ 0x5a));
const [envControl, fileControl, ...canaries] = process.argv.slice(1).map(dec);
const has = (b) => canaries.some((c) => b.includes(c));
const out = { files: 0, bytes: 0, unreadable: 0, environs: 0, cmdlines: 0, hits: [], control: { environ: false, file: false } };
for (const pid of fs.readdirSync('/proc').filter((p) => /^\\d+$/.test(p))) {
  for (const kind of ['environ', 'cmdline']) {
    try {
      const b = fs.readFileSync('/proc/' + pid + '/' + kind);
      out[kind === 'environ' ? 'environs' : 'cmdlines'] += 1;
      if (has(b)) out.hits.push('/proc/' + pid + '/' + kind);
      if (kind === 'environ' && b.includes(envControl)) out.control.environ = true;
    } catch { out.unreadable += 1; }
  }
}
const walk = (p) => {
  let st;
  try { st = fs.lstatSync(p); } catch { out.unreadable += 1; return; }
  if (st.isDirectory()) {
    let names;
    try { names = fs.readdirSync(p); } catch { out.unreadable += 1; return; }
    for (const n of names) walk(path.join(p, n));
    return;
  }
  if (!st.isFile()) return;
  if (st.size > 64 * 1024 * 1024) { out.unreadable += 1; return; }
  try {
    const b = fs.readFileSync(p);
    out.files += 1; out.bytes += b.length;
    if (has(b)) out.hits.push(p);
    if (b.includes(fileControl)) out.control.file = true;
  } catch { out.unreadable += 1; }
};
// The read-only root is the image, searched in full from the host (docker export). Here: every other
// mount — tmpfs scratch, the workspace and state volumes, the files Docker binds (/etc/hosts …).
const pseudo = new Set(['proc', 'sysfs', 'cgroup', 'cgroup2', 'devpts', 'mqueue', 'devtmpfs', 'securityfs']);
out.mounts = fs.readFileSync('/proc/self/mounts', 'utf8').split('\\n').map((l) => l.split(' '))
  .filter((f) => f.length > 2 && !pseudo.has(f[2]) && f[1] !== '/' && !/^\\/(proc|sys|dev)(\\/|$)/.test(f[1])).map((f) => f[1]);
for (const m of out.mounts) walk(m);
console.log(JSON.stringify(out));
`;

/** XOR-encodes a needle (hex) for SEARCH_SCRIPT's argv. */
export const enc = (s: string) => Buffer.from(Buffer.from(s).map((b) => b ^ 0x5a)).toString('hex');
