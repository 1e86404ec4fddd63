import type { Socket } from 'node:net';
import { z } from 'zod';
import { AirlockError } from '../../contracts/errors';
import { DisposableStore, Emitter, type Disposable, type Event } from '../common/disposable';
import type { NetworkMode } from '../sandbox/driver';
import { formatAllowEntry, toAllowEntry, type AllowEntry } from './allowlist';
import { EgressProxy, type EgressEvent, type EgressProxyOptions } from './egress-proxy';
import { internalHostName } from './address-checks';
import { CredentialBroker, type BrokeredSecret } from './gateway/credential-broker';
import type { SecretFetchEvent } from './gateway/host-command-secret';
import { NetworkApprovals } from './gateway/network-approvals';
import { loadProjectRules } from './gateway/project-rules';
import { RunCa } from './gateway/run-ca';
import { parseRule, RuleSet } from './gateway/rules';
import { installRunCa } from './gateway/sandbox-trust';
import { TlsGateway } from './gateway/tls-gateway';
import { derivePresets, PRESET_NAMES, type Preset, type PresetContext } from './presets';
import { ProjectNetworkStore } from './project-network-store';

/**
 * A run's network policy (docs/architecture.md §2.2):
 * - `none` (default): loopback only; the model proxy arrives through the channel.
 * - `allowlist`: egress only through the run's logging egress proxy, to allowed host names.
 * - `open`: full egress; needs a sandbox created with network `open`, shown with a warning.
 */
export const NetworkPolicySchema = z.discriminatedUnion('mode', [
  z.object({ mode: z.literal('none') }).strict(),
  z
    .object({
      mode: z.literal('allowlist'),
      /** Presets derived from the host's tool configuration. */
      presets: z.array(z.enum(PRESET_NAMES)).default([]),
      /** Custom entries: `host`, `*.example.com`, `host:8443`, or a URL. */
      allow: z.array(z.string().min(1).max(300)).max(500).default([]),
      /** Ordered gateway rules (`HOST read-only`, `HOST allow GET /path/**`…): their hosts are intercepted. */
      rules: z.array(z.string().min(1).max(400)).max(200).default([]),
      /** Hosts reachable although they resolve to LAN addresses: exact names, chosen by the user. */
      internalHosts: z.array(z.string().min(1).max(253)).max(50).default([]),
    })
    .strict(),
  z.object({ mode: z.literal('open') }).strict(),
]);
export type NetworkPolicy = z.input<typeof NetworkPolicySchema>;

/** What the channel must offer (ChannelClient satisfies it). */
export interface PolicyChannel {
  exposeHostService(sandboxPort: number, connect: () => Socket, opts?: { name?: string; closeIdle?: boolean }): Promise<{ port: number } & Disposable>;
  readFile(path: string, opts?: { maxBytes?: number }): Promise<Buffer>;
  writeFile(path: string, data: Buffer | string, opts?: { mode?: number }): Promise<void>;
}

/** What the policy needs from a sandbox (core/sandbox's Sandbox satisfies it). */
export interface PolicySandbox {
  readonly runId: string;
  readonly channel: PolicyChannel;
}

export interface ApplyNetworkPolicyOptions {
  /** The network the sandbox was created with (`SandboxSpec.network`). */
  sandboxNetwork: NetworkMode;
  /**
   * The project (`path`) and Airlock's data directory (`home`): the project's remembered hosts join the
   * allowlist, and "allow for the project" persists there.
   */
  project?: { path: string; home: string };
  /** Where presets read the host's tool configuration (the root's env; home and cwd default to the user's home and the project). */
  presetContext: PresetContext;
  /** Port for the proxy inside the sandbox (default 0: the helper picks a free one). */
  sandboxProxyPort?: number;
  /** Extra proxy settings (timeouts; tests inject a resolver). */
  proxyOptions?: Omit<EgressProxyOptions, 'runId' | 'allow' | 'projectStore' | 'gateway' | 'internalHosts'>;
  /** The secrets chosen for this run, resolved from the keychain (values stay on the host). */
  secrets?: BrokeredSecret[];
  /** Extra CAs trusted for upstream servers on top of the bundled roots (a company CA; tests). */
  upstreamCa?: string[];
  /**
   * Hold a request a user rule refuses and ask the user (Allow once / for this project / Deny) instead
   * of refusing at once. Off by default: only a caller with someone to ask (the run service) turns it on.
   */
  askUser?: boolean;
  /** How long a refused intercepted request, or an agent's proposal, waits for the user's answer (default 120 s). */
  approvalWaitMs?: number;
}

/** How the run record shows the policy (and the UI warns for `open`). */
export interface NetworkRecord {
  policy: 'none' | 'allowlist' | 'open';
  /** Allowed entries at the start of the run (`host`, `host:port,port`, `*.domain`). */
  allow: string[];
  /** Presets and where their hosts came from. */
  presets?: Array<{ name: string; allow: string[]; sources: string[]; notes: string[] }>;
  /** Entries remembered for the project that this run started with. */
  projectAllow?: string[];
  /** Hosts that may resolve to private addresses in this run: the run's own and the project's (§2.8). */
  internalHosts?: string[];
  /** Non-loopback interfaces seen inside the sandbox when the policy was applied. */
  interfaces: string[];
  /** Whether the sandbox has a default route (true only for `open`). */
  defaultRoute: boolean;
  /** Shown by the UI beside the run. */
  warning?: string;
  /** The gateway, when any host is intercepted: its rules, the secrets by name, and the CA's subject. */
  gateway?: { rules: string[]; projectRules: string[]; secrets: string[]; internalHosts: string[]; approvedForProject?: string[] };
}

/** The applied policy: environment for processes in the sandbox, the record, and what to tear down. */
export interface AppliedNetworkPolicy extends Disposable {
  /** Set on every process started in the sandbox. */
  env: Record<string, string>;
  record: NetworkRecord;
  /** The egress proxy (allowlist only): `allowOnce`, `allowForRun`, `allowForProject`, `entries()`. */
  proxy?: EgressProxy;
  /** Questions put to the user while intercepted requests wait, and agent-proposed rules (gateway only). */
  approvals?: NetworkApprovals;
  /** Every connection attempt through the egress proxy (never fires for `none`/`open`). */
  onDidConnect: Event<EgressEvent>;
  /** Every run of a command secret's host command (first use, expiry, a 401); never the value. */
  onDidFetchSecret: Event<SecretFetchEvent>;
  /** Stops the proxy and removes the in-sandbox listener. */
  close(): Promise<void>;
}

/** Interfaces and routes inside the sandbox, read from procfs through the channel. */
export async function inspectSandboxNetwork(channel: PolicyChannel): Promise<{ interfaces: string[]; defaultRoute: boolean }> {
  let dev: string;
  try {
    dev = (await channel.readFile('/proc/net/dev', { maxBytes: 1024 * 1024 })).toString('utf8');
  } catch (err) {
    throw new AirlockError('SANDBOX_FAILED', `could not read the sandbox's network interfaces: ${(err as Error).message}`, { cause: err });
  }
  const interfaces = dev
    .split('\n')
    .slice(2)
    .map((l) => l.split(':')[0]?.trim() ?? '')
    .filter((n) => n.length > 0 && n !== 'lo');
  let route = '';
  try {
    route = (await channel.readFile('/proc/net/route', { maxBytes: 1024 * 1024 })).toString('utf8');
  } catch {
    // No IPv4 routing table (an IPv6-only or very minimal kernel): no default route.
  }
  const defaultRoute = route
    .split('\n')
    .slice(1)
    .some((l) => l.trim().split(/\s+/)[1] === '00000000');
  return { interfaces, defaultRoute };
}

const OPEN_WARNING =
  'Open network: processes in this sandbox can reach any address, including your LAN; the model proxy still holds the key.';

/** Why a run without `askUser` refuses at once (docs/architecture.md §2.8: no-wait). */
const NO_ONE_TO_ASK = 'this run does not put requests to the user (network approvals "deny": a non-interactive `airlock run`, or `--network-approvals deny`)';

/** A run nobody watches: the denial says how the user can allow it next time instead of "ask the user". */
function noOneToAsk(host: string, method: string, path: string): string {
  return `${NO_ONE_TO_ASK}; the user can allow it with a rule (\`--rule '${host} allow ${method} ${path}'\`) or run again at a terminal or with \`--network-approvals ask\``;
}

/** The sandbox's interfaces, after checking it has nothing but loopback (none and allowlist need no route out). */
async function loopbackOnly(sandbox: PolicySandbox): Promise<Awaited<ReturnType<typeof inspectSandboxNetwork>>> {
  const seen = await inspectSandboxNetwork(sandbox.channel);
  if (seen.interfaces.length > 0 || seen.defaultRoute) {
    throw new AirlockError(
      'SANDBOX_FAILED',
      `the sandbox should have only loopback but has ${seen.interfaces.join(', ') || 'a default route'}; it was not isolated — recreate it`,
    );
  }
  return seen;
}

/**
 * The run's TLS gateway (rules, the project's rules, brokered secrets) with its approvals desk and a
 * run CA installed in the sandbox; both are added to `store`. Returns the CA's trust variables.
 */
async function startGateway(
  sandbox: PolicySandbox,
  opts: ApplyNetworkPolicyOptions,
  parts: { rules: RuleSet; projectRules: RuleSet | undefined; broker: CredentialBroker | undefined; projectStore: ProjectNetworkStore | undefined; store: DisposableStore },
): Promise<{ gateway: TlsGateway; approvals: NetworkApprovals; trustEnv: Record<string, string> }> {
  const { rules, projectRules, broker, projectStore, store } = parts;
  const ca = await RunCa.create(sandbox.runId);
  let gateway: TlsGateway | undefined;
  const approvals = new NetworkApprovals({ rules, ...(projectStore ? { projectStore } : {}), intercepts: (host) => gateway?.intercepts(host) === true, ...(opts.approvalWaitMs ? { waitMs: opts.approvalWaitMs } : {}) });
  store.add(approvals);
  gateway = new TlsGateway({
    ...(opts.askUser ? { approvals } : { howToAsk: noOneToAsk }),
    ca,
    rules,
    ...(projectRules ? { projectRules } : {}),
    ...(broker ? { broker } : {}),
    ...(opts.upstreamCa ? { upstreamCa: opts.upstreamCa } : {}),
    idleTimeoutMs: opts.proxyOptions?.idleTimeoutMs ?? 300_000,
  });
  store.add(gateway);
  return { gateway, approvals, trustEnv: await installRunCa(sandbox.channel, ca.certificatePem) };
}

/** The egress proxy, reachable on loopback inside the sandbox; a proxy that cannot be exposed is closed. */
async function exposeProxy(sandbox: PolicySandbox, proxy: EgressProxy, port: number): Promise<{ port: number } & Disposable> {
  try {
    // Clients (npm) keep hundreds of tunnels idle far longer than the proxy's own idle timeout: at
    // the cap, the helper closes idle ones for those waiting (docs/architecture.md §4).
    return await sandbox.channel.exposeHostService(port, () => proxy.connect(), { name: 'egress proxy', closeIdle: true });
  } catch (err) {
    await proxy.close();
    throw err;
  }
}

/** git's and npm's settings for the brokered secrets (placeholders only), for the ports each host is allowed on. */
async function brokerToolEnv(sandbox: PolicySandbox, broker: CredentialBroker, proxy: EgressProxy): Promise<Record<string, string>> {
  // git and npm name a registry by host and port.
  const portsOf = (host: string) => proxy.entries().find((e) => e.host === host)?.ports?.filter((p) => p !== 80) ?? [443];
  const env = broker.gitEnv(portsOf);
  const npmrc = broker.npmrcLines(portsOf);
  if (npmrc.length) {
    // Only placeholders: the sandbox's npm sends one, the gateway swaps it toward the registry.
    await sandbox.channel.writeFile('/tmp/.airlock-egress/npmrc', `${npmrc.join('\n')}\n`, { mode: 0o644 });
    return { ...env, NPM_CONFIG_USERCONFIG: '/tmp/.airlock-egress/npmrc' };
  }
  return env;
}

/** The proxy variables every process in the sandbox gets, npm's own included. */
function proxyEnv(url: string): Record<string, string> {
  const noProxy = '127.0.0.1,localhost';
  return {
    HTTP_PROXY: url,
    HTTPS_PROXY: url,
    http_proxy: url,
    https_proxy: url,
    NO_PROXY: noProxy,
    no_proxy: noProxy,
    // npm reads its own settings first; keep it on the proxy even when a project .npmrc says otherwise.
    npm_config_proxy: url,
    npm_config_https_proxy: url,
    npm_config_noproxy: noProxy,
  };
}

/** What the project's own config asks for and the user has not allowed (`granted`): said, not granted. */
function notAllowedWarning(presets: readonly Preset[], granted: readonly string[]): string | undefined {
  const asked = presets.flatMap((p) => p.pending.map((q) => ({ text: formatAllowEntry(q.entry), from: q.from }))).filter((q) => !granted.includes(q.text) && !granted.includes(q.text.replace(/:\d+$/, '')));
  return asked.length
    ? `the project's own config asks for ${asked.map((q) => `${q.text} (${q.from})`).join(', ')}: not allowed unless you allow it (Allow when it is blocked, or --allow)`
    : undefined;
}

/**
 * Sets up what the sandbox needs for `policy`:
 * - `none` → nothing (checks the sandbox really has no interface but loopback);
 * - `allowlist` → starts the run's egress proxy, exposes it inside the sandbox through the channel,
 *   and returns the proxy variables (`HTTP_PROXY`… and npm's) for every process;
 * - `open` → nothing to start; refuses a sandbox that was not created with network `open`, and
 *   records the policy as open with a warning.
 */
export async function applyNetworkPolicy(
  sandbox: PolicySandbox,
  policy: NetworkPolicy,
  opts: ApplyNetworkPolicyOptions,
): Promise<AppliedNetworkPolicy> {
  const parsed = NetworkPolicySchema.parse(policy);
  const emitter = new Emitter<EgressEvent>();
  const fetchedSecrets = new Emitter<SecretFetchEvent>();
  const store = new DisposableStore();
  store.add(emitter);
  store.add(fetchedSecrets);
  const finish = (base: { env: Record<string, string>; record: NetworkRecord }, egress?: EgressProxy, approvals?: NetworkApprovals) => appliedPolicy(base, { store, emitter, fetchedSecrets }, egress, approvals);

  if (parsed.mode === 'open') {
    if (opts.sandboxNetwork !== 'open') {
      throw new AirlockError(
        'CONFLICT',
        'the "open" network policy needs a sandbox created with network "open"; start the run again with the open policy',
      );
    }
    const seen = await inspectSandboxNetwork(sandbox.channel);
    return finish({ env: {}, record: { policy: 'open', allow: [], ...seen, warning: OPEN_WARNING } });
  }

  // none and allowlist both rely on the sandbox having no route out: a process that ignores the
  // proxy variables must get nowhere.
  if (opts.sandboxNetwork !== 'none') {
    throw new AirlockError(
      'CONFLICT',
      `the "${parsed.mode}" network policy needs a sandbox created with network "none" (it has "${opts.sandboxNetwork}")`,
    );
  }
  const seen = await loopbackOnly(sandbox);
  if (parsed.mode === 'none') {
    return finish({ env: {}, record: { policy: 'none', allow: [], ...seen } });
  }

  // Presets read the project's own tool config too (a project .npmrc naming its registry).
  const presetContext: PresetContext = { ...(opts.project ? { cwd: opts.project.path } : {}), ...opts.presetContext };
  const presets: Preset[] = await derivePresets(parsed.presets, presetContext);
  const custom: AllowEntry[] = parsed.allow.map((e) => toAllowEntry(e));
  const projectStore = opts.project ? new ProjectNetworkStore(opts.project.path, opts.project.home) : undefined;
  const projectAllow = projectStore ? await projectStore.load() : [];
  // Rules the user approved "for this project" in earlier runs come first: they answered a refusal.
  const approvedForProject = projectStore ? (await projectStore.loadRules()).map(parseRule) : [];
  // Internal hosts: the run's and those the user named for the project, by name only (docs/architecture.md §2.8).
  const internalHosts = [...new Set([...parsed.internalHosts.map(internalHostName), ...(projectStore ? await projectStore.loadInternalHosts() : [])])];
  const rules = new RuleSet([...approvedForProject, ...parsed.rules.map(parseRule)]);
  const projectRules = opts.project ? await loadProjectRules(opts.project.path) : undefined;
  const broker = opts.secrets?.length ? new CredentialBroker(opts.secrets) : undefined;
  if (broker) {
    store.add(broker);
    store.add(broker.onDidFetch((e) => fetchedSecrets.fire(e)));
  }
  const { gateway, approvals, trustEnv } =
    rules.rules.length || projectRules?.rules.length || broker ? await startGateway(sandbox, opts, { rules, projectRules, broker, projectStore, store }) : { gateway: undefined, approvals: undefined, trustEnv: {} };
  const proxy = await EgressProxy.start({
    ...opts.proxyOptions,
    runId: sandbox.runId,
    allow: [...presets.flatMap((p) => p.entries), ...custom],
    ...(projectStore ? { projectStore } : {}),
    ...(gateway ? { gateway } : {}),
    internalHosts,
    ...(approvals
      ? {
          accessDesk: opts.askUser
            ? (body: string, signal: AbortSignal) => (approvals as NetworkApprovals).propose(body, 443, signal)
            : () => Promise.resolve({ status: 403, text: `the proposal was not put to anyone: ${NO_ONE_TO_ASK}` }),
        }
      : {}),
  });
  store.add({ dispose: () => void proxy.close() });
  store.add(proxy.onDidConnect((e) => emitter.fire(e)));
  const exposed = store.add(await exposeProxy(sandbox, proxy, opts.sandboxProxyPort ?? 0));
  const env: Record<string, string> = { ...proxyEnv(`http://127.0.0.1:${exposed.port}`), ...trustEnv, ...broker?.env(), ...(broker ? await brokerToolEnv(sandbox, broker, proxy) : {}) };
  const warning = notAllowedWarning(presets, proxy.entries().map(formatAllowEntry));
  return finish(
    {
      env,
      record: {
        ...(warning ? { warning } : {}),
        policy: 'allowlist',
        allow: proxy.entries().map(formatAllowEntry),
        presets: presets.map((p) => ({ name: p.name, allow: p.entries.map(formatAllowEntry), sources: p.sources, notes: p.notes })),
        ...(projectStore ? { projectAllow: projectAllow.map(formatAllowEntry) } : {}),
        ...(internalHosts.length ? { internalHosts } : {}),
        ...(gateway
          ? { gateway: { rules: rules.rules.map((r) => r.text), projectRules: projectRules?.rules.map((r) => r.text) ?? [], secrets: broker?.names ?? [], internalHosts, ...(approvedForProject.length ? { approvedForProject: approvedForProject.map((r) => r.text) } : {}) } }
          : {}),
        ...seen,
      },
    },
    proxy,
    approvals,
  );
}

/** The applied policy handed back: closing it closes the egress proxy, then everything in `store`. */
function appliedPolicy(
  base: { env: Record<string, string>; record: NetworkRecord },
  parts: { store: DisposableStore; emitter: Emitter<EgressEvent>; fetchedSecrets: Emitter<SecretFetchEvent> },
  egress?: EgressProxy,
  approvals?: NetworkApprovals,
): AppliedNetworkPolicy {
  let closing: Promise<void> | undefined;
  const close = (): Promise<void> => {
    closing ??= (async () => {
      if (egress) await egress.close();
      parts.store.dispose();
    })();
    return closing;
  };
  return {
    ...base,
    ...(egress ? { proxy: egress } : {}),
    ...(approvals ? { approvals } : {}),
    onDidConnect: parts.emitter.event,
    onDidFetchSecret: parts.fetchedSecrets.event,
    close,
    dispose: () => void close(),
  };
}
