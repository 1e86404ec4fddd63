import { AirlockError } from '../../contracts/errors';

/** Prefixes only OpenAI issues (project, service-account and admin keys). */
const OPENAI_ONLY = /^sk-(proj|svcacct|admin)-/;
/** The prefix only Anthropic issues. */
const ANTHROPIC_ONLY = /^sk-ant-/;

/** The providers' own API hosts: only there is a key's format unambiguous. */
const OFFICIAL_HOST: Record<string, string> = { anthropic: 'api.anthropic.com', openai: 'api.openai.com' };

function isOfficial(kind: string, baseUrl: string): boolean {
  try {
    return new URL(baseUrl).hostname === OFFICIAL_HOST[kind];
  } catch {
    return false;
  }
}

/**
 * Refuses a key that is unambiguously another provider's (an OpenAI `sk-proj-…` key offered to
 * Anthropic, or an Anthropic `sk-ant-…` key to OpenAI), before it is stored and fails at the first
 * call. Only for the providers' own hosts: a gateway or compatible server at another base URL may
 * take keys of any shape.
 */
export function checkKeyFormat(provider: { id: string; kind: string; label: string }, baseUrl: string, key: string): void {
  if (!isOfficial(provider.kind, baseUrl)) return;
  if (provider.kind === 'anthropic' && OPENAI_ONLY.test(key)) {
    throw new AirlockError('INVALID_INPUT', `That looks like an OpenAI key (it starts with "${key.slice(0, key.indexOf('-', 3) + 1)}"), not an Anthropic one; paste a key that starts with "sk-ant-", or store this one under an OpenAI provider.`, { field: 'key' });
  }
  if (provider.kind === 'openai' && ANTHROPIC_ONLY.test(key)) {
    throw new AirlockError('INVALID_INPUT', `That looks like an Anthropic key (it starts with "sk-ant-"), not a key for ${provider.label}; store it under the anthropic provider instead.`, { field: 'key' });
  }
}
