import { describe, expect, it } from 'vitest';
import { commandEnv, GATEWAY_PLACEHOLDER_PREFIX } from './command-env';

describe('commandEnv', () => {
  it('drops the agent\'s provider settings, its run token and anything named like a secret', () => {
    const env = commandEnv({ PATH: '/bin', AIRLOCK_RUN_TOKEN: 'run-tok', ANTHROPIC_API_KEY: 'k', OPENAI_BASE_URL: 'u', GH_TOKEN: 'ghp_real', MY_SECRET: 's', NPM_API_KEY: 'n' });
    expect(env).toEqual({ PATH: '/bin' });
  });

  it('keeps a gateway placeholder under a secret-like name: the agent\'s commands are meant to use it', () => {
    const placeholder = `${GATEWAY_PLACEHOLDER_PREFIX}gh-0123abcd`;
    expect(commandEnv({ GH_TOKEN: placeholder, NPM_TOKEN: 'real' })).toEqual({ GH_TOKEN: placeholder });
  });
});
