// pip: the indexes of this machine's pip configuration, or pip's built-in default.
import path from 'node:path';
import { Collector, readText, type Ctx, type Preset } from './preset-context';

/** `index-url`, `extra-index-url`, `find-links` values of an INI pip.conf (continuation lines included). */
function parsePipConf(text: string): Array<{ key: string; value: string }> {
  const out: Array<{ key: string; value: string }> = [];
  let current: string | undefined;
  for (const line of text.split(/\r?\n/)) {
    if (/^\s*[#;]/.test(line) || /^\s*\[/.test(line)) {
      current = undefined;
      continue;
    }
    const kv = /^([A-Za-z_-]+)\s*[=:]\s*(.*)$/.exec(line);
    if (kv) {
      current = (kv[1] as string).toLowerCase().replace(/_/g, '-');
      for (const v of (kv[2] as string).split(/\s+/).filter(Boolean)) out.push({ key: current, value: v });
    } else if (current && /^\s+\S/.test(line)) {
      for (const v of line.trim().split(/\s+/)) out.push({ key: current, value: v });
    }
  }
  return out;
}

const PIP_URL_KEYS = new Set(['index-url', 'extra-index-url', 'find-links']);

export async function pipPreset(ctx: Ctx): Promise<Preset> {
  const c = new Collector();
  let indexConfigured = false;
  const take = (key: string, value: string, from: string) => {
    if (!PIP_URL_KEYS.has(key)) return;
    const added = c.addUrl(value, from);
    if (added && key === 'index-url') indexConfigured = true;
  };
  for (const [envName, key] of [
    ['PIP_INDEX_URL', 'index-url'],
    ['PIP_EXTRA_INDEX_URL', 'extra-index-url'],
    ['PIP_FIND_LINKS', 'find-links'],
  ] as const) {
    for (const v of (ctx.env[envName] ?? '').split(/\s+/).filter(Boolean)) take(key, v, envName);
  }
  let listed = false;
  if (ctx.useTools) {
    // Python isolated (`-I`: no working directory or user site on the import path, no PYTHON*
    // variables), never the `pip3` launcher script, whose interpreter runs without it.
    const out = await ctx.run('python3', ['-I', '-m', 'pip', 'config', 'list'], { env: ctx.env, cwd: ctx.home });
    if (out !== undefined) {
      listed = true;
      for (const line of out.split(/\r?\n/)) {
        const m = /^(\S*?)\.([a-z-]+)='(.*)'$/.exec(line.trim());
        if (!m) continue;
        for (const v of (m[3] as string).split(/\s+/).filter(Boolean)) take(m[2] as string, v, `pip config ${m[1]}.${m[2]}`);
      }
    }
  }
  if (!listed) {
    const files = [
      path.join(ctx.root, 'etc/pip.conf'),
      path.join(ctx.root, 'etc/xdg/pip/pip.conf'),
      path.join(ctx.home, '.pip/pip.conf'),
      path.join(ctx.env.XDG_CONFIG_HOME ?? path.join(ctx.home, '.config'), 'pip/pip.conf'),
      ctx.env.PIP_CONFIG_FILE,
    ].filter((f): f is string => !!f);
    for (const file of files) {
      const text = await readText(file);
      if (text === undefined) continue;
      for (const { key, value } of parsePipConf(text)) take(key, value, file);
    }
  }
  if (!indexConfigured && ctx.useTools) {
    // No index configured: ask the installed pip for its built-in default index and file host.
    const out = await ctx.run(
      'python3',
      ['-I', '-c', 'from pip._internal.models.index import PyPI\nprint(PyPI.simple_url)\nprint("https://" + PyPI.file_storage_domain + "/")'],
      { env: ctx.env, cwd: ctx.home },
    );
    if (out) for (const line of out.split(/\r?\n/).filter(Boolean)) c.addUrl(line, "pip's built-in default index");
  }
  return c.result('pip');
}
