import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { checkRunEnvironment } from './run-environment';

const dirs: string[] = [];
afterEach(async () => {
  for (const d of dirs.splice(0)) await rm(d, { recursive: true, force: true });
});

async function project(files: Record<string, string>): Promise<string> {
  const d = await mkdtemp(path.join(tmpdir(), 'airlock-auto-'));
  dirs.push(d);
  for (const [name, content] of Object.entries(files)) {
    await mkdir(path.dirname(path.join(d, name)), { recursive: true });
    await writeFile(path.join(d, name), content);
  }
  return d;
}

/** docs/architecture.md §16, "Choosing": `auto` never fails because of a devcontainer the user did not accept. */
describe('auto falls back to Airlock’s image', () => {
  const cases: Array<[string, Record<string, string>, RegExp, string]> = [
    ['a published feature', { '.devcontainer/devcontainer.json': '{"image":"debian:bookworm-slim","features":{"localhost:1/airlock-test/go:1":{}}}' }, /feature 'localhost:1\/airlock-test\/go:1': the registry localhost:1 is unreachable/, '.devcontainer/devcontainer.json'],
    ['no image at all', { '.devcontainer.json': '{"name":"x"}' }, /image|build|dockerComposeFile/, '.devcontainer.json'],
    ['a syntax error', { '.devcontainer.json': '{\n  "image": "x"\n  "name": "y"\n}\n' }, /^not used, Airlock's own image ran instead: \.devcontainer\.json:3:3: comma expected/, '.devcontainer.json'],
    ['a compose file it cannot read', { '.devcontainer/devcontainer.json': '{"dockerComposeFile":"c.yml","service":"app"}', '.devcontainer/c.yml': 'services: [\n' }, /c\.yml/, '.devcontainer/devcontainer.json'],
    ['a missing Dockerfile', { '.devcontainer/devcontainer.json': '{"build":{"dockerfile":"Dockerfile"}}' }, /does not exist/, '.devcontainer/devcontainer.json'],
    ['several named configurations', { '.devcontainer/go/devcontainer.json': '{"image":"golang"}', '.devcontainer/py/devcontainer.json': '{"image":"python"}' }, /2 devcontainer configurations \(go, py\).*--environment devcontainer:go/, '.devcontainer/*/devcontainer.json'],
  ];
  for (const [what, files, reason, field] of cases) {
    it(`${what}: the run keeps Airlock's image and says why in one line; an explicit or accepting choice still fails`, async () => {
      const home = await project({});
      const dir = await project(files);
      const checked = await checkRunEnvironment({ home, env: process.env }, { projectDir: dir });
      expect(checked.kind).toBe('airlock');
      const skipped = 'skipped' in checked ? checked.skipped : undefined;
      expect(skipped?.field).toBe(field);
      expect(skipped?.reason).toMatch(/^not used, Airlock's own image ran instead: /);
      expect(skipped?.reason).toMatch(reason);
      expect(skipped?.reason).not.toContain('\n');
      // Chosen explicitly, or accepted in this request: the user asked for it, so its error stands.
      await expect(checkRunEnvironment({ home, env: process.env }, { projectDir: dir, environment: 'devcontainer' })).rejects.toThrow();
      await expect(checkRunEnvironment({ home, env: process.env }, { projectDir: dir, trustEnvironment: true })).rejects.toThrow();
    });
  }

  it('a long reason is cut to one bounded line', async () => {
    const home = await project({});
    const many = { [`not-a-registry-id-${'x'.repeat(600)}`]: {} };
    const dir = await project({ '.devcontainer.json': JSON.stringify({ image: 'debian:bookworm-slim', features: many }) });
    const checked = await checkRunEnvironment({ home, env: process.env }, { projectDir: dir });
    const reason = 'skipped' in checked ? checked.skipped.reason : '';
    expect(reason.length).toBeLessThanOrEqual(450);
    expect(reason.endsWith('…')).toBe(true);
  });
});
