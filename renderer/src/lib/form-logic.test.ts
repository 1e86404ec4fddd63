import { describe, expect, it } from 'vitest';
import { EngineSetting, Isolation, type Settings } from '../../../contracts';
import type { NewRunDraft } from '../stores/new-run-form-store';
import { attemptsOf, startBlockedReason, startInputOf } from './new-run-start';
import { ENGINE_OPTIONS, gitHistoryOptions, ISOLATION_OPTIONS } from './option-labels';
import { draftOf, followSaved } from './settings-draft';

/* The screens' logic kept out of their components: option lists, Start's rules, the Settings draft. */

const DRAFT: NewRunDraft = {
  projectDir: ' /work/p ', task: 'fix it', agent: 'builtin', customCommand: 'aider', provider: 'anthropic', model: ' m ', approval: 'auto',
  isolation: 'container', network: 'allowlist', allowlist: 'preset:npm, example.com  ', timeoutMin: '2.5', budgetTokens: '', budgetUsd: '0.5',
  egressRules: '', secrets: [], networkApprovals: 'ask', check: '', attempts: [],
};

describe('option lists from the contract enums', () => {
  it('offers every enum value in order, with its label, and parses back only those', () => {
    expect(ENGINE_OPTIONS.options.map((o) => o.value)).toEqual(EngineSetting.options);
    expect(ISOLATION_OPTIONS.options.map((o) => o.label)).toEqual(['Container', 'gVisor container', 'Virtual machine']);
    expect(ISOLATION_OPTIONS.parse('vm')).toBe('vm');
    expect(() => ISOLATION_OPTIONS.parse('chroot')).toThrow(/'chroot' is not one of container, gvisor, vm/);
    expect(Isolation.options).toHaveLength(ISOLATION_OPTIONS.options.length);
  });

  it("git history: none, 10, 50, the setting's own count, all; parsed by the contract's schema", () => {
    const { options, parse } = gitHistoryOptions(20);
    expect(options.map((o) => o.value)).toEqual(['none', '10', '20', '50', 'all']);
    expect(gitHistoryOptions('all').options.map((o) => o.value)).toEqual(['none', '10', '50', 'all']);
    expect(parse('20')).toBe(20);
    expect(parse('all')).toBe('all');
    expect(() => parse('0')).toThrow();
    expect(() => parse('some')).toThrow();
  });
});

describe('New run: Start', () => {
  it('says why it cannot start, first problem first', () => {
    const ok = { noneUsable: false, vmBlocked: false };
    expect(startBlockedReason(DRAFT, ok)).toBeUndefined();
    expect(startBlockedReason({ ...DRAFT, projectDir: '  ' }, ok)).toBe('Choose a project folder.');
    expect(startBlockedReason(DRAFT, { ...ok, folderProblem: 'no such folder' })).toBe('Fix the project folder (see its field).');
    expect(startBlockedReason({ ...DRAFT, task: ' ' }, ok)).toBe('Describe the task.');
    expect(startBlockedReason({ ...DRAFT, provider: '' }, { ...ok, noneUsable: true })).toMatch(/Add a provider key first/);
    expect(startBlockedReason({ ...DRAFT, provider: '' }, ok)).toBe('Choose a provider.');
    expect(startBlockedReason({ ...DRAFT, model: ' ' }, ok)).toBe('Enter a model id.');
    expect(startBlockedReason({ ...DRAFT, isolation: 'vm' }, { ...ok, vmBlocked: true })).toMatch(/Virtual machine isolation is not available/);
    expect(startBlockedReason(DRAFT, { ...ok, vmBlocked: true })).toBeUndefined();
    expect(startBlockedReason({ ...DRAFT, attempts: [{ agent: 'codex', provider: '', model: '' }] }, ok)).toMatch(/Add a second attempt/);
  });

  it('sends the gateway (rules one per line, secrets, deny) and the check only with the allow-list policy', () => {
    const gateway = { ...DRAFT, egressRules: 'github.com read-only\n# a note\n\n  api.github.com git-push=agent/ ', secrets: ['gh'], networkApprovals: 'deny' as const, check: ' npm test ' };
    expect(startInputOf(gateway, 50)).toMatchObject({ egressRules: ['github.com read-only', 'api.github.com git-push=agent/'], secrets: ['gh'], networkApprovals: 'deny', check: { command: 'npm test' } });
    const open = startInputOf({ ...gateway, network: 'open' }, 50);
    expect([open.egressRules, open.secrets, open.networkApprovals]).toEqual([undefined, undefined, undefined]);
    expect(open.check).toEqual({ command: 'npm test' });
  });

  it('makes an attempt group of two or more rows, empty provider and model meaning the form\'s', () => {
    expect(attemptsOf(DRAFT)).toBeUndefined();
    expect(attemptsOf({ ...DRAFT, attempts: [{ agent: 'builtin', provider: '', model: '' }, { agent: 'codex', provider: 'openai', model: ' gpt-5 ' }] }))
      .toEqual([{ agent: 'builtin' }, { agent: 'codex', provider: 'openai', model: 'gpt-5' }]);
  });

  it('sends the draft with numbers from their text, the allow-list only for that policy', () => {
    const input = startInputOf(DRAFT, 50);
    expect(input).toMatchObject({ projectDir: '/work/p', model: 'm', allowlist: ['preset:npm', 'example.com'], gitHistory: 50, limits: { timeoutSec: 150, budgetUsd: 0.5 } });
    expect(input.customCommand).toBeUndefined();
    expect(input.limits?.budgetTokens).toBeUndefined();
    expect(startInputOf({ ...DRAFT, network: 'open' }, 'none').allowlist).toBeUndefined();
    // Internal hosts go with the allow-list policy only.
    expect(startInputOf({ ...DRAFT, internalHosts: ' git.corp.test, npm.corp.test ' }, 50).internalHosts).toEqual(['git.corp.test', 'npm.corp.test']);
    expect(startInputOf({ ...DRAFT, network: 'open', internalHosts: 'git.corp.test' }, 50).internalHosts).toBeUndefined();
    expect(startInputOf(DRAFT, 50).internalHosts).toBeUndefined();
    expect(startInputOf({ ...DRAFT, agent: 'custom' }, 50).customCommand).toBe('aider');
    // A limit under ten seconds is raised to ten; an empty one is the default half hour.
    expect(startInputOf({ ...DRAFT, timeoutMin: '0.01' }, 50).limits?.timeoutSec).toBe(10);
    expect(startInputOf({ ...DRAFT, timeoutMin: '' }, 50).limits?.timeoutSec).toBe(1800);
  });
});

describe('Settings draft', () => {
  const saved: Settings = { theme: 'system', notifications: true, transcripts: false, defaultAgent: 'builtin', defaultApproval: 'auto', defaultIsolation: 'container', defaultNetwork: 'none', defaultTimeoutSec: 1800, defaultAllowlist: [] };
  it('follows settings saved elsewhere in the fields not edited here', () => {
    const editing = { ...draftOf(saved), timeoutMin: '45', theme: 'light' as const };
    const elsewhere: Settings = { ...saved, theme: 'dark', notifications: false, defaultTimeoutSec: 600 };
    const next = followSaved(editing, saved, elsewhere);
    expect(next.notifications).toBe(false);
    // Edited here: kept as typed.
    expect(next.timeoutMin).toBe('45');
    expect(next.theme).toBe('light');
  });
});
