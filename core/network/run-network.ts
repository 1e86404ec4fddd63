import { AirlockError } from '../../contracts/errors';
import type { Sandbox } from '../sandbox/sandbox';
import { ALLOW_LOOPBACK_TARGETS_FOR_TESTS, type EgressProxyOptions } from './egress-proxy';
import { SecretStore } from './gateway/secret-store';
import { applyNetworkPolicy, type NetworkPolicy } from './network-policy';
import { PRESET_NAMES, type PresetName } from './presets';

/** Tests only: the egress proxy's resolver (and loopback switch), so tests reach a fake registry here. */
export type EgressProxyForTests = Pick<EgressProxyOptions, 'resolve' | typeof ALLOW_LOOPBACK_TARGETS_FOR_TESTS> & {
  /** The test server's CA, trusted for upstream TLS on top of the bundled roots (verification stays on). */
  upstreamCa?: string[];
};

/**
 * A run's network policy from its input: allow-list entries named `preset:npm` (pip, cargo, go, apt)
 * are presets, the rest hosts. An unknown preset is INVALID_INPUT naming the ones there are.
 */
export function parseRunNetworkPolicy(policy: 'allowlist' | 'open', allowlist: readonly string[], rules: readonly string[] = [], internalHosts: readonly string[] = []): NetworkPolicy {
  if (policy === 'open') return { mode: 'open' };
  const presets = allowlist.filter((a) => a.startsWith('preset:')).map((a) => a.slice('preset:'.length));
  const unknown = presets.filter((p) => !(PRESET_NAMES as readonly string[]).includes(p));
  if (unknown.length) throw new AirlockError('INVALID_INPUT', `Unknown network preset ${unknown.join(', ')}; presets are ${PRESET_NAMES.map((p) => `preset:${p}`).join(', ')}.`);
  return { mode: 'allowlist', presets: presets as PresetName[], allow: allowlist.filter((a) => !a.startsWith('preset:')), rules: [...rules], internalHosts: [...internalHosts] };
}

/**
 * A run's wider network policy, applied to its sandbox. Allow-list entries named `preset:npm` take the
 * registries from the host's own configuration of that tool.
 */
export async function applyRunNetwork(
  sandbox: Sandbox,
  run: { runId: string; policy: 'allowlist' | 'open'; allowlist: string[]; egressRules?: string[]; secrets?: string[]; internalHosts?: string[]; networkApprovals?: 'ask' | 'deny'; projectDir: string },
  host: { home: string; keychainService: string; env: NodeJS.ProcessEnv },
  proxyOptions?: EgressProxyForTests,
) {
  const { home, keychainService, env } = host;
  // Only the secrets chosen for this run leave the keychain, and only into this process (docs/architecture.md §2.8).
  // A secret defined as a host command runs it only when the gateway first needs the value.
  const secrets = run.secrets?.length ? await new SecretStore({ home, service: keychainService }).forRun(run.secrets, { env }) : [];
  const applied = await applyNetworkPolicy(sandbox, parseRunNetworkPolicy(run.policy, run.allowlist, run.egressRules, run.internalHosts), {
    sandboxNetwork: run.policy === 'open' ? 'open' : 'none',
    // A run has someone to ask (the run view, `airlock run` at a terminal) unless it says it has not:
    // a non-interactive `airlock run` refuses at once instead of holding the request (docs/architecture.md §2.8).
    askUser: run.networkApprovals !== 'deny',
    project: { path: run.projectDir, home },
    presetContext: { env },
    ...(secrets.length ? { secrets } : {}),
    ...(proxyOptions?.upstreamCa ? { upstreamCa: proxyOptions.upstreamCa } : {}),
    ...(proxyOptions
      ? { proxyOptions: { ...(proxyOptions.resolve ? { resolve: proxyOptions.resolve } : {}), ...(proxyOptions[ALLOW_LOOPBACK_TARGETS_FOR_TESTS] ? { [ALLOW_LOOPBACK_TARGETS_FOR_TESTS]: true as const } : {}) } }
      : {}),
  });
  return {
    env: applied.env,
    record: applied.record,
    onDidConnect: applied.onDidConnect,
    onDidFetchSecret: applied.onDidFetchSecret,
    ...(applied.approvals ? { approvals: applied.approvals } : {}),
    async allow(host: string, port: number | undefined, scope: 'once' | 'run' | 'project') {
      const proxy = applied.proxy;
      if (!proxy) throw new AirlockError('CONFLICT', `This run's network policy is ${run.policy}; hosts are allowed only under the allow-list policy.`);
      const entry = port ? `${host}:${port}` : host;
      if (scope === 'once') proxy.allowOnce(host, port);
      else if (scope === 'run') proxy.allowForRun(entry);
      else await proxy.allowForProject(entry);
    },
    dispose: () => applied.dispose(),
  };
}
