import path from 'node:path';
import { AirlockError } from '../../../contracts/errors';
import type { AppContext } from '../../app-context';
import { internalHostName, isIpLiteral } from '../../network/address-checks';
import { formatAllowEntry, parseAllowEntry } from '../../network/allowlist';
import type { Resolver } from '../../network/egress-proxy';
import { derivePresets, PRESET_NAMES } from '../../network/presets';
import { ProjectNetworkStore } from '../../network/project-network-store';
import { CliUsageError, parseCliArgs } from '../args';
import { ExitCode, type CliCommand } from '../command';
import { withApp } from '../with-app';

const USAGE = `airlock network presets [--json]
       airlock network list   (--project DIR | --run RUN_ID) [--json]
       airlock network allow  HOST[:PORT,…]|URL … (--project DIR | --run RUN_ID) [--internal]
       airlock network remove HOST_PATTERN … (--project DIR | --run RUN_ID)
       airlock network check URL [--method M] [--project DIR] [--allow HOST]… [--rule 'HOST read-only']… [--secret NAME]… [--internal-host NAME]… [--json]

  --internal      the hosts are servers of your own network: they may resolve to private (LAN)
                  addresses in every run of the project (exact names; never loopback or link-local)`;

/** The URL's host looked up once; undefined for an address, a bad URL or a failed lookup (the check says the rest). */
async function lookUp(url: string, resolve: Resolver): Promise<string[] | undefined> {
  let host: string;
  try {
    host = new URL(url).hostname.replace(/^\[|\]$/g, '');
  } catch {
    return undefined;
  }
  if (!host || isIpLiteral(host)) return undefined;
  try {
    return await resolve(host);
  } catch {
    return undefined;
  }
}

/** The project a `--project`/`--run` option names; a run is looked up in the run history. */
async function projectFor(values: { project?: string; run?: string }, app: AppContext): Promise<string> {
  if (values.project && values.run) throw new AirlockError('INVALID_INPUT', 'give either --project or --run, not both');
  if (values.project) return path.resolve(values.project);
  if (values.run) {
    return (await app.store.get(values.run)).projectDir;
  }
  throw new AirlockError('INVALID_INPUT', 'name the project with --project DIR or a run with --run RUN_ID');
}

/**
 * `airlock network …`: shows the presets derived from this machine's tool configuration, and
 * lists / adds / removes the hosts remembered for a project. Hosts added here reach running
 * allow-list runs of that project at once (their proxy re-reads the project list before denying).
 */
export const networkCommand: CliCommand = {
  name: 'network',
  summary: 'Network presets and the hosts allowed for a project (allow-list policy).',
  usage: USAGE,
  async run(args, io) {
    const { values, positionals } = parseCliArgs(args, {
      project: { type: 'string' },
      run: { type: 'string' },
      json: { type: 'boolean', default: false },
      method: { type: 'string', default: 'GET' },
      allow: { type: 'string', multiple: true },
      rule: { type: 'string', multiple: true },
      secret: { type: 'string', multiple: true },
      internal: { type: 'boolean', default: false },
      'internal-host': { type: 'string', multiple: true },
    });
    const [sub, ...rest] = positionals;
    const print = (text: string) => io.stdout.write(text.endsWith('\n') ? text : `${text}\n`);
    switch (sub) {
      case 'presets': {
        const presets = await derivePresets(PRESET_NAMES, { env: io.env });
        if (values.json) {
          print(JSON.stringify(presets));
        } else {
          for (const p of presets) {
            print(`${p.name}: ${p.entries.map(formatAllowEntry).join(' ') || '(none)'}`);
            for (const s of p.sources) print(`  from ${s}`);
            for (const n of p.notes) print(`  note: ${n}`);
          }
        }
        return ExitCode.ok;
      }
      case 'list':
      case 'allow':
      case 'remove': {
        const { project, store } = await withApp(io, async (app) => {
          const dir = await projectFor(values, app);
          return { project: dir, store: new ProjectNetworkStore(dir, app.home) };
        });
        if (sub !== 'list' && rest.length === 0) throw new CliUsageError(`name at least one host to ${sub}`);
        if (values.internal && sub !== 'allow') throw new CliUsageError('--internal goes with `airlock network allow` (remove takes a host off both lists)');
        let entries = await store.load();
        let internal = await store.loadInternalHosts();
        if (sub === 'allow') {
          // Validate everything before writing anything.
          const parsed = rest.map((r) => parseAllowEntry(r));
          if (values.internal) parsed.forEach((e) => internalHostName(e.host));
          for (const e of parsed) entries = await store.add(e);
          if (values.internal) internal = await store.addInternalHosts(parsed.map((e) => e.host));
        } else if (sub === 'remove') {
          for (const r of rest) entries = await store.remove(r);
          internal = await store.removeInternalHosts(rest);
        }
        if (values.json) print(JSON.stringify({ project, file: store.file, allow: entries.map(formatAllowEntry), internalHosts: internal }));
        else {
          print(`hosts allowed for ${project}:`);
          print(entries.length ? entries.map((e) => `  ${formatAllowEntry(e)}`).join('\n') : '  (none)');
          if (internal.length) print(`internal hosts (may resolve to private addresses):\n${internal.map((h) => `  ${h}`).join('\n')}`);
        }
        return ExitCode.ok;
      }
      case 'check': {
        // Which layer decides a request, with what a run of this project would start with; nothing is sent.
        if (rest.length !== 1) throw new CliUsageError('name one URL: airlock network check https://host/path --method POST');
        const { checkRequest } = await import('../../network/gateway/check');
        const { systemResolver } = await import('../../network/egress-proxy');
        const { loadProjectRules } = await import('../../network/gateway/project-rules');
        const { secretStoreFor } = await import('./secrets');
        const project = values.project ? path.resolve(values.project) : undefined;
        const chosen = new Set(values.secret ?? []);
        const { remembered, projectInternal, bindings } = await withApp(io, async (app) => ({
          remembered: project ? await new ProjectNetworkStore(project, app.home).load() : [],
          projectInternal: project ? await new ProjectNetworkStore(project, app.home).loadInternalHosts() : [],
          bindings: chosen.size ? (await secretStoreFor(app).list()).filter((s) => chosen.has(s.name)) : [],
        }));
        const missing = [...chosen].filter((n) => !bindings.some((b) => b.name === n));
        if (missing.length) throw new AirlockError('NOT_FOUND', `no secret named ${missing.join(', ')} (see \`airlock secrets list\`)`);
        const projectRules = project ? await loadProjectRules(project) : undefined;
        const internalHosts = [...projectInternal, ...(values['internal-host'] ?? []).map(internalHostName)];
        // One lookup, as a run's proxy makes (DNS only; nothing is sent to the host): the address decides too.
        const addresses = await lookUp(rest[0] as string, io.egressProxyForTests?.resolve ?? systemResolver);
        const result = checkRequest({ url: rest[0] as string, method: values.method, allow: [...remembered, ...(values.allow ?? [])], rules: values.rule ?? [], ...(projectRules ? { projectRules } : {}), secrets: bindings, internalHosts, ...(addresses ? { addresses } : {}) });
        if (values.json) print(JSON.stringify(result));
        else {
          print(`${result.allowed ? 'allowed' : 'refused'}: ${result.method} ${result.url}`);
          print(`  decided by ${result.decidedBy}${result.rule ? ` (${result.rule})` : ''}: ${result.reason}`);
          print(`  ${result.intercepted ? 'intercepted (TLS terminated on this machine)' : 'not intercepted'}${result.secrets.length ? `; secret injected: ${result.secrets.join(', ')}` : ''}`);
        }
        return result.allowed ? ExitCode.ok : ExitCode.failure;
      }
      default:
        throw new CliUsageError(sub ? `unknown subcommand '${sub.slice(0, 40)}'` : 'name a subcommand');
    }
  },
};
