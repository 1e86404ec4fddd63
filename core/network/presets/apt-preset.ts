// apt: the repositories of this machine's sources (one-line and deb822).
import { readdir } from 'node:fs/promises';
import path from 'node:path';
import { Collector, readText, type Ctx, type Preset } from './preset-context';

/** URIs from one-line `deb [opts] uri suite …` lines. */
function parseAptOneLine(text: string): string[] {
  const out: string[] = [];
  for (const raw of text.split(/\r?\n/)) {
    const line = raw.replace(/#.*$/, '').trim();
    const m = /^deb(?:-src)?\s+(?:\[[^\]]*\]\s+)?(\S+)/.exec(line);
    if (m) out.push(m[1] as string);
  }
  return out;
}

/** URIs from deb822 `.sources` stanzas (skipping `Enabled: no`). */
function parseAptDeb822(text: string): string[] {
  const out: string[] = [];
  for (const stanza of text.split(/\r?\n\s*\r?\n/)) {
    const fields = new Map<string, string>();
    let last: string | undefined;
    for (const raw of stanza.split(/\r?\n/)) {
      if (raw.startsWith('#')) continue;
      const kv = /^([A-Za-z0-9-]+):\s*(.*)$/.exec(raw);
      if (kv) {
        last = (kv[1] as string).toLowerCase();
        fields.set(last, kv[2] as string);
      } else if (last && /^\s+\S/.test(raw)) {
        fields.set(last, `${fields.get(last) ?? ''} ${raw.trim()}`);
      }
    }
    if ((fields.get('enabled') ?? 'yes').trim().toLowerCase() === 'no') continue;
    out.push(...(fields.get('uris') ?? '').split(/\s+/).filter(Boolean));
  }
  return out;
}

export async function aptPreset(ctx: Ctx): Promise<Preset> {
  const c = new Collector();
  const etc = path.join(ctx.root, 'etc/apt');
  const main = path.join(etc, 'sources.list');
  const text = await readText(main);
  if (text) for (const uri of parseAptOneLine(text)) c.addUrl(uri, main);
  const dir = path.join(etc, 'sources.list.d');
  let names: string[] = [];
  try {
    names = (await readdir(dir)).sort();
  } catch {
    // No sources.list.d.
  }
  for (const name of names) {
    // apt itself reads only these two extensions (".disabled", ".save"… are ignored).
    const file = path.join(dir, name);
    if (name.endsWith('.list')) {
      const t = await readText(file);
      if (t) for (const uri of parseAptOneLine(t)) c.addUrl(uri, file);
    } else if (name.endsWith('.sources')) {
      const t = await readText(file);
      if (t) for (const uri of parseAptDeb822(t)) c.addUrl(uri, file);
    }
  }
  return c.result('apt');
}
