/**
 * What the gateway puts in the sandbox in place of a secret (docs/architecture.md §2.8): worthless
 * anywhere but in a request to the secret's bound host, where the gateway swaps it for the value.
 */
export const GATEWAY_PLACEHOLDER_PREFIX = 'airlock-placeholder-';

/**
 * The environment of a command the agent runs: the agent's own, minus its provider settings and
 * the run token (they stay with the agent), minus anything named like a secret — except a gateway
 * placeholder (`GH_TOKEN=airlock-placeholder-…`), which is there for the agent's commands to use.
 * Node 18 safe (the built-in agent bundles it).
 */
export function commandEnv(env: Record<string, string | undefined>): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [k, v] of Object.entries(env)) {
    if (v === undefined || /^(AIRLOCK_|ANTHROPIC_|OPENAI_)/.test(k)) continue;
    if (/API_KEY|TOKEN|SECRET/i.test(k) && !v.startsWith(GATEWAY_PLACEHOLDER_PREFIX)) continue;
    out[k] = v;
  }
  return out;
}
