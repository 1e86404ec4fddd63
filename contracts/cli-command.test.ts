import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { describe, expect, it } from 'vitest';
import { cliCommandFor, shellWord } from './cli-command';

const run = promisify(execFile);

/** The words bash reads from a command line (the shell the README's commands are pasted into). */
async function bashWords(line: string): Promise<string[]> {
  const { stdout } = await run('bash', ['--noprofile', '--norc', '-c', `set -- ${line}; printf '%s\\0' "$@"`]);
  return stdout.split('\0').slice(0, -1);
}

describe('cliCommandFor', () => {
  it('writes every gateway setting, the check and the attempts as the flags airlock run reads', async () => {
    const line = cliCommandFor(
      {
        projectDir: '/home/me/my project', task: "Fix the user's bug; then `rm -rf $HOME`", agent: 'builtin', provider: 'anthropic', model: 'claude-opus-4-5',
        approval: 'ask', isolation: 'gvisor', network: 'allowlist', allowlist: ['preset:npm', 'github.com'], egressRules: ['github.com read-only', 'api.github.com git-push=agent/'],
        secrets: ['gh'], internalHosts: ['git.corp.example.com'], mcpServers: ['linear'], networkApprovals: 'deny', gitHistory: 'all', limits: { timeoutSec: 600, budgetTokens: 50_000 }, check: { command: 'npm test -- --run' },
      },
      [{ agent: 'builtin', provider: 'anthropic', model: 'claude-opus-4-5' }, { agent: 'codex', provider: 'openai', model: 'gpt-5' }],
    );
    expect(await bashWords(line.replace(/^airlock run /, ''))).toEqual([
      '/home/me/my project', '--task', "Fix the user's bug; then `rm -rf $HOME`", '--provider', 'anthropic', '--model', 'claude-opus-4-5', '--approve-commands',
      '--isolation', 'gvisor', '--network', 'allowlist', '--allow', 'preset:npm', '--allow', 'github.com', '--rule', 'github.com read-only', '--rule', 'api.github.com git-push=agent/',
      '--secret', 'gh', '--internal-host', 'git.corp.example.com', '--network-approvals', 'deny', '--mcp', 'linear', '--git-history', 'all', '--timeout', '600', '--budget-tokens', '50000', '--check', 'npm test -- --run',
      '--attempts', 'builtin:anthropic/claude-opus-4-5,codex:openai/gpt-5',
    ]);
  });

  it('leaves out what is the default, and gateway flags without the allow-list policy', () => {
    expect(cliCommandFor({ projectDir: '/p', task: 't', agent: 'codex', provider: 'openai', model: 'gpt-5', network: 'none', gitHistory: 50, limits: { timeoutSec: 1800 }, secrets: ['gh'] }))
      .toBe('airlock run /p --task t --agent codex --provider openai --model gpt-5');
  });

  it('quotes anything a shell would read', () => {
    expect(shellWord("it's")).toBe(`'it'\\''s'`);
    expect(shellWord('a$b')).toBe(`'a$b'`);
    expect(shellWord('preset:npm')).toBe('preset:npm');
  });
});
