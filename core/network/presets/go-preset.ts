// Go: GOPROXY and GOSUMDB of this machine (environment, `go env`, or its env file).
import path from 'node:path';
import { Collector, readText, type Ctx, type Preset } from './preset-context';

/** `KEY=value` lines of the file `go env -w` writes. */
function parseGoEnvFile(text: string): Map<string, string> {
  const out = new Map<string, string>();
  for (const line of text.split(/\r?\n/)) {
    const m = /^([A-Z0-9_]+)=(.*)$/.exec(line.trim());
    if (m) out.set(m[1] as string, m[2] as string);
  }
  return out;
}

export async function goPreset(ctx: Ctx): Promise<Preset> {
  const c = new Collector();
  let goproxy = ctx.env.GOPROXY;
  let gosumdb = ctx.env.GOSUMDB;
  let fromWhere = 'environment';
  if ((goproxy === undefined || gosumdb === undefined) && ctx.useTools) {
    // From the home folder with GOTOOLCHAIN=local: a project's go.mod `toolchain` line never makes
    // go download and run another toolchain, and no go.work of the project applies.
    const out = await ctx.run('go', ['env', 'GOPROXY', 'GOSUMDB'], { env: ctx.env, cwd: ctx.home });
    if (out !== undefined) {
      const [p, s] = out.split(/\r?\n/);
      goproxy ??= p;
      gosumdb ??= s;
      fromWhere = 'go env';
    }
  }
  if (goproxy === undefined || gosumdb === undefined) {
    const file = ctx.env.GOENV ?? path.join(ctx.env.XDG_CONFIG_HOME ?? path.join(ctx.home, '.config'), 'go/env');
    const text = await readText(file);
    if (text) {
      const vars = parseGoEnvFile(text);
      goproxy ??= vars.get('GOPROXY');
      gosumdb ??= vars.get('GOSUMDB');
      fromWhere = file;
    }
  }
  for (const part of (goproxy ?? '').split(/[,|]/).map((s) => s.trim()).filter(Boolean)) {
    if (part === 'direct') c.note('GOPROXY includes "direct": modules fetched straight from their VCS hosts need those hosts added');
    else if (part !== 'off') c.addUrl(part, `GOPROXY (${fromWhere})`);
  }
  if (gosumdb && gosumdb !== 'off') {
    // "name", "name+key" or "name+key url": the URL when given, otherwise the name is the host.
    const [name, url] = gosumdb.trim().split(/\s+/);
    const host = url ?? `https://${(name ?? '').split('+')[0]}/`;
    c.addUrl(host, `GOSUMDB (${fromWhere})`);
  }
  return c.result('go');
}
