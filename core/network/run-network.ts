import { AirlockError } from '../../contracts/errors';
import type { Sandbox } from '../sandbox/sandbox';
import type { ALLOW_LOOPBACK_TARGETS_FOR_TESTS, EgressProxyOptions } from './egress-proxy';
import { applyNetworkPolicy, type NetworkPolicy } from './network-policy';
import { PRESET_NAMES, type PresetName } from './presets';

/** Tests only: the egress proxy's resolver (and loopback switch), so tests reach a fake registry here. */
export type EgressProxyForTests = Pick<EgressProxyOptions, 'resolve' | typeof ALLOW_LOOPBACK_TARGETS_FOR_TESTS>;

/**
 * A run's network policy from its input: allow-list entries named `preset:npm` (pip, cargo, go, apt)
 * are presets, the rest hosts. An unknown preset is INVALID_INPUT naming the ones there are.
 */
export function parseRunNetworkPolicy(policy: 'allowlist' | 'open', allowlist: readonly string[]): NetworkPolicy {
  if (policy === 'open') return { mode: 'open' };
  const presets = allowlist.filter((a) => a.startsWith('preset:')).map((a) => a.slice('preset:'.length));
  const unknown = presets.filter((p) => !(PRESET_NAMES as readonly string[]).includes(p));
  if (unknown.length) throw new AirlockError('INVALID_INPUT', `Unknown network preset ${unknown.join(', ')}; presets are ${PRESET_NAMES.map((p) => `preset:${p}`).join(', ')}.`);
  return { mode: 'allowlist', presets: presets as PresetName[], allow: allowlist.filter((a) => !a.startsWith('preset:')) };
}

/**
 * A run's wider network policy, applied to its sandbox. Allow-list entries named `preset:npm` take the
 * registries from the host's own configuration of that tool.
 */
export async function applyRunNetwork(
  sandbox: Sandbox,
  run: { runId: string; policy: 'allowlist' | 'open'; allowlist: string[]; projectDir: string },
  home: string,
  proxyOptions?: EgressProxyForTests,
) {
  const applied = await applyNetworkPolicy(sandbox, parseRunNetworkPolicy(run.policy, run.allowlist), {
    sandboxNetwork: run.policy === 'open' ? 'open' : 'none',
    projectPath: run.projectDir,
    home,
    ...(proxyOptions ? { proxyOptions } : {}),
  });
  return {
    env: applied.env,
    record: applied.record,
    onDidConnect: applied.onDidConnect,
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
