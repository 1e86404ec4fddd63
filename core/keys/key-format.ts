import { AirlockError } from '../../contracts/errors';

/** Prefixes only OpenAI issues (project, service-account and admin keys). */
const OPENAI_ONLY = /^sk-(proj|svcacct|admin)-/;
/** The prefix only Anthropic issues. */
const ANTHROPIC_ONLY = /^sk-ant-/;

/**
 * Refuses a key that is unambiguously another provider's (an OpenAI `sk-proj-…` key offered for an
 * Anthropic-format provider, or an Anthropic `sk-ant-…` key for OpenAI), before it is stored and
 * fails at the first call. Anything not clearly someone else's is accepted: gateways and
 * compatible servers use formats of their own.
 */
export function checkKeyFormat(provider: { id: string; kind: string; label: string }, key: string): void {
  if (provider.kind === 'anthropic' && OPENAI_ONLY.test(key)) {
    throw new AirlockError('INVALID_INPUT', `That looks like an OpenAI key (it starts with "${key.slice(0, key.indexOf('-', 3) + 1)}"), not an Anthropic one; paste a key that starts with "sk-ant-", or store this one under an OpenAI provider.`, { field: 'key' });
  }
  if (provider.kind === 'openai' && ANTHROPIC_ONLY.test(key)) {
    throw new AirlockError('INVALID_INPUT', `That looks like an Anthropic key (it starts with "sk-ant-"), not a key for ${provider.label}; store it under the anthropic provider instead.`, { field: 'key' });
  }
}
