/**
 * The environment of a command the agent runs: the agent's own, minus its provider settings and
 * the run token (they stay with the agent), minus anything named like a secret. Node 18 safe (the
 * built-in agent bundles it).
 */
export function commandEnv(env: Record<string, string | undefined>): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [k, v] of Object.entries(env)) {
    if (v === undefined || /^(AIRLOCK_|ANTHROPIC_|OPENAI_)/.test(k) || /API_KEY|TOKEN|SECRET/i.test(k)) continue;
    out[k] = v;
  }
  return out;
}
