// npm: the registries of this machine's npm configuration; a project `.npmrc`'s are pending.
import path from 'node:path';
import { Collector, readText, type Ctx, type Preset } from './preset-context';

/** `key=value` lines of an .npmrc (ini without sections); `${VAR}` expanded from env. */
function parseNpmrc(text: string, env: NodeJS.ProcessEnv): Map<string, string> {
  const out = new Map<string, string>();
  for (const line of text.split(/\r?\n/)) {
    const t = line.trim();
    if (!t || t.startsWith('#') || t.startsWith(';')) continue;
    const eq = t.indexOf('=');
    if (eq < 0) continue;
    const key = t.slice(0, eq).trim();
    const value = t
      .slice(eq + 1)
      .trim()
      .replace(/^['"]|['"]$/g, '')
      .replace(/\$\{([^}]+)\}/g, (_, v: string) => env[v] ?? '');
    out.set(key, value);
  }
  return out;
}

export async function npmPreset(ctx: Ctx): Promise<Preset> {
  const c = new Collector();
  await npmMachinePreset(ctx, c);
  // The project's own .npmrc is not this machine's configuration: its registries are shown, not allowed.
  const projectNpmrc = path.join(ctx.cwd, '.npmrc');
  const userNpmrc = ctx.env.npm_config_userconfig ?? ctx.env.NPM_CONFIG_USERCONFIG ?? path.join(ctx.home, '.npmrc');
  if (path.resolve(projectNpmrc) !== path.resolve(userNpmrc)) {
    const text = await readText(projectNpmrc);
    if (text !== undefined) {
      for (const [key, value] of parseNpmrc(text, {})) {
        if (key === 'registry' || /^@[^:]+:registry$/.test(key)) c.addPending(value, `project .npmrc ${key}`);
      }
    }
  }
  return c.result('npm');
}

/** The registries of this machine's npm configuration (npm itself, else its files), without the project's. */
async function npmMachinePreset(ctx: Ctx, c: Collector): Promise<void> {
  if (ctx.useTools) {
    // npm's update check would ask the registry for its own latest version: reading config must not.
    const env = { ...ctx.env, npm_config_update_notifier: 'false' };
    // From the home folder, not the project: npm merges the .npmrc of the package folder it runs in.
    const json = await ctx.run('npm', ['config', 'list', '--json'], { env, cwd: ctx.home });
    if (json) {
      try {
        const config = JSON.parse(json) as Record<string, unknown>;
        // Only registry keys are read; auth entries in the same config are never touched.
        for (const [key, value] of Object.entries(config)) {
          if ((key === 'registry' || /^@[^:]+:registry$/.test(key)) && typeof value === 'string') {
            c.addUrl(value, `npm config ${key}`);
          }
        }
        return;
      } catch {
        c.note('could not read `npm config list --json`; fell back to .npmrc files');
      }
    }
  }
  // Without npm: the same files npm reads, lowest precedence first.
  const files = [
    ctx.env.npm_config_globalconfig ?? ctx.env.NPM_CONFIG_GLOBALCONFIG,
    ctx.env.npm_config_userconfig ?? ctx.env.NPM_CONFIG_USERCONFIG ?? path.join(ctx.home, '.npmrc'),
  ].filter((f): f is string => !!f);
  const merged = new Map<string, { value: string; from: string }>();
  for (const file of files) {
    const text = await readText(file);
    if (text === undefined) continue;
    for (const [k, v] of parseNpmrc(text, ctx.env)) merged.set(k, { value: v, from: file });
  }
  const envRegistry = ctx.env.npm_config_registry ?? ctx.env.NPM_CONFIG_REGISTRY;
  if (envRegistry) merged.set('registry', { value: envRegistry, from: 'npm_config_registry' });
  for (const [key, { value, from }] of merged) {
    if (key === 'registry' || /^@[^:]+:registry$/.test(key)) c.addUrl(value, `${from} ${key}`);
  }
}
