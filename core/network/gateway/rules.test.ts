import { describe, expect, it } from 'vitest';
import { checkProposal } from './network-approvals';
import { decideWithProject, parseRefUpdates, parseRule, pathReadings, pushOutsidePrefix, RuleSet } from './rules';

const req = (method: string, path: string, query = '') => ({ host: 'git.example.com', method, path, query });
const pkt = (s: string) => `${(s.length + 4).toString(16).padStart(4, '0')}${s}`;
const Z = '0'.repeat(40);
const A = 'a'.repeat(40);

describe('gateway rules', () => {
  it('parses the line forms and explains bad ones', () => {
    expect(parseRule('API.github.com allow get,post /repos/**')).toMatchObject({ host: 'api.github.com', kind: 'allow', methods: ['GET', 'POST'], path: '/repos/**', text: 'api.github.com allow GET,POST /repos/**' });
    expect(parseRule('github.com git-push=agent/').pushPrefix).toBe('agent/');
    expect(() => parseRule('github.com sometimes')).toThrow(/unknown rule "sometimes"/);
    expect(() => parseRule('github.com git-push=refs/heads/x')).toThrow(/branch prefix/);
    expect(() => parseRule('10.0.0.1 read-only')).toThrow(/IP addresses/);
  });

  it('first matching rule decides; an allow list refuses what it does not name; dot segments do not slip past', () => {
    const rules = new RuleSet(['git.example.com deny DELETE', 'git.example.com allow GET /repos/me/**']);
    expect(rules.decide(req('GET', '/repos/me/x'))?.allowed).toBe(true);
    expect(rules.decide(req('DELETE', '/repos/me/x'))).toMatchObject({ allowed: false, rule: 'git.example.com deny DELETE' });
    expect(rules.decide(req('GET', '/repos/me/../other/x'))?.allowed).toBe(false);
    expect(rules.decide(req('GET', '/repos/me/%2e%2e/other'))?.allowed).toBe(false);
    expect(rules.decide({ ...req('GET', '/'), host: 'elsewhere.com' })).toBeUndefined();
    expect(new RuleSet(['git.example.com deny DELETE']).decide(req('GET', '/x'))?.allowed).toBe(true);
  });

  it('paths are judged as servers read them: doubled slashes, ;parameters, case, encodings do not pass a deny', () => {
    const deny = new RuleSet(['git.example.com deny /admin/**', 'git.example.com deny /admin']);
    for (const p of ['/admin', '/admin/x', '//admin', '//admin/x', '/admin;x', '/admin;jsessionid=1/x', '/ADMIN', '/Admin/x', '/%61dmin', '/%41DMIN/x', '/x/..;/admin', '/x%2F..%2Fadmin', '/x%2f..%2fadmin/y', '/x%5C..%5Cadmin', '/x\\..\\admin', '/%2561dmin', '/./admin', '/a/%2e%2e/admin']) {
      expect(deny.decide(req('GET', p)), p).toMatchObject({ allowed: false });
    }
    expect(deny.decide(req('GET', '/administrator'))?.allowed).toBe(true);
    expect(deny.decide(req('GET', '/public/admin.txt'))?.allowed).toBe(true);
    // Unjudgeable paths are refused outright.
    for (const p of ['/x%zz', '/x%', '/x%00', '/x%0d%0a', '/x%ff']) expect(pathReadings(p), p).toHaveProperty('unjudgeable');
    expect(deny.decide(req('GET', '/x%ff'))).toMatchObject({ allowed: false, reason: expect.stringMatching(/cannot be judged/) });
    // An allow list passes a path only when every reading is allowed; an encoded / that every reading agrees on passes.
    const allow = new RuleSet(['git.example.com allow GET /repos/me/**', 'git.example.com allow GET /@scope%2Fpkg']);
    expect(allow.decide(req('GET', '/repos/me/x'))?.allowed).toBe(true);
    expect(allow.decide(req('GET', '/repos/me/x%2F..%2F..%2Fother'))?.allowed).toBe(false);
    expect(allow.decide(req('GET', '/repos/ME/x'))?.allowed).toBe(false);
    expect(allow.decide(req('GET', '/repos/me/..;/other'))?.allowed).toBe(false);
    expect(new RuleSet(['git.example.com allow GET /**']).decide(req('GET', '/@scope%2fpkg'))?.allowed).toBe(true);
    expect(new RuleSet(['git.example.com deny /admin/**']).decide(req('GET', '/@scope%2fpkg'))?.allowed).toBe(true);
    // A push read one way and not another still carries its prefix.
    const push = new RuleSet(['git.example.com git-push=agent/']);
    expect(push.decide(req('POST', '/r.git/git-receive-pack;x'))?.pushPrefix).toBe('agent/');
    expect(new RuleSet(['git.example.com git-fetch']).decide(req('POST', '/r.git//git-receive-pack'))?.allowed).toBe(false);
  });

  it('"narrower than the whole host" follows the matcher: globs that match every path are not offered', () => {
    const intercepts = () => true;
    for (const g of ['/**', '/*', '/***', '/**/**', '/*/**', '/**/*', '/*/*/**', '/**e', '/./**', '/../**']) {
      expect(checkProposal(`git.example.com allow GET ${g}`, intercepts), g).toHaveProperty('error');
    }
    for (const g of ['/repos/me/**', '/**/issues', '/api/v1/*']) expect(checkProposal(`git.example.com allow GET ${g}`, intercepts), g).toHaveProperty('path', g);
  });

  it('read-only and git-fetch let a clone through and refuse a push', () => {
    for (const r of ['git.example.com read-only', 'git.example.com git-fetch']) {
      const rules = new RuleSet([r]);
      expect(rules.decide(req('GET', '/r.git/info/refs', 'service=git-upload-pack'))?.allowed).toBe(true);
      expect(rules.decide(req('POST', '/r.git/git-upload-pack'))?.allowed).toBe(true);
      expect(rules.decide(req('GET', '/r.git/info/refs', 'service=git-receive-pack'))).toMatchObject({ allowed: false, reason: expect.stringMatching(/git push is refused/) });
      expect(rules.decide(req('POST', '/r.git/git-receive-pack'))?.allowed).toBe(false);
    }
  });

  it('a project policy tightens and never widens', () => {
    const user = new RuleSet(['git.example.com git-push=agent/']);
    const project = new RuleSet(['git.example.com git-fetch', 'other.example.com allow']);
    expect(decideWithProject(user, project, req('POST', '/r.git/git-receive-pack'))).toMatchObject({ allowed: false, rule: 'git.example.com git-fetch (project policy)' });
    expect(decideWithProject(new RuleSet(['git.example.com deny POST']), new RuleSet(['git.example.com allow']), req('POST', '/x'))?.allowed).toBe(false);
    expect(decideWithProject(user, new RuleSet(['git.example.com git-push=agent/x-']), req('POST', '/r.git/git-receive-pack'))?.pushPrefix).toBe('agent/x-');
  });

  it('reads the ref updates of a push and checks them against the prefix', () => {
    const body = Buffer.from(pkt(`${Z} ${A} refs/heads/agent/one\0report-status side-band-64k\n`) + pkt(`${A} ${Z} refs/heads/main\n`) + '0000PACK....');
    expect(parseRefUpdates(body.subarray(0, 30))).toBeUndefined();
    const parsed = parseRefUpdates(body)!;
    expect(parsed.updates.map((u) => u.ref)).toEqual(['refs/heads/agent/one', 'refs/heads/main']);
    expect(body.subarray(parsed.end).toString()).toBe('PACK....');
    expect(pushOutsidePrefix(parsed.updates, 'agent/')).toBe('push to refs/heads/main is outside refs/heads/agent/');
    expect(pushOutsidePrefix(parsed.updates.slice(0, 1), 'agent/')).toBeUndefined();
    expect(() => parseRefUpdates(Buffer.from('zzzz'))).toThrow(/pkt-line/);
  });
});
