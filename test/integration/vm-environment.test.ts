/**
 * docs/architecture.md §16, "VM isolation on a derived image": a project environment under `--isolation vm`. The VM's
 * root disk is made from the derived image (Go, no Node of its own; Airlock's runtime under
 * /opt/airlock), the setup phase reaches a registry stand-in through the allowlist over the channel
 * as in a container, the agent's `go test` runs in the VM and its output reaches the model; the
 * disk is cached per derived image id and the run's own files are wiped.
 */
import { readdir, readFile } from 'node:fs/promises';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { StartRunInput } from '../../contracts/runs';
import { vmPaths } from '../../core/sandbox/qemu/vm-paths';
import { NODELESS_DOCKERFILE, nodelessImage } from '../support/environment-images';
import { requirePrerequisite } from '../support/prerequisites';
import { createRunFixture, FAKE_PACKAGE, FAKE_REGISTRY_HOST, startFakeRegistry, type FakeRegistry, type RunFixture } from '../support/run-fixture';

const qemu = await requirePrerequisite('qemu');
const docker = await requirePrerequisite('docker');

/** A Go module with one injected bug: its test fails, and says how. */
const GO_PROJECT = {
  'go.mod': 'module example.com/calc\n\ngo 1.19\n',
  'calc.go': 'package calc\n\n// Add returns a + b.\nfunc Add(a, b int) int { return a - b }\n',
  'calc_test.go': 'package calc\n\nimport "testing"\n\nfunc TestAdd(t *testing.T) {\n\tif got := Add(2, 3); got != 5 {\n\t\tt.Fatalf("Add(2, 3) = %d, want 5", got)\n\t}\n}\n',
};

/** QEMU processes naming the run (its disks and sockets live in the run's directory). */
async function qemuProcessesOf(runId: string): Promise<number[]> {
  const pids: number[] = [];
  for (const name of await readdir('/proc')) {
    if (!/^\d+$/.test(name) || Number(name) === process.pid) continue;
    const cmd = await readFile(`/proc/${name}/cmdline`, 'utf8').catch(() => '');
    if (cmd.includes('qemu-system') && cmd.includes(runId)) pids.push(Number(name));
  }
  return pids;
}

describe.skipIf(!qemu.ok || !docker.ok)('a project environment in a VM (QEMU, derived image, fake upstream)', () => {
  let f: RunFixture;
  let registry: FakeRegistry;

  beforeAll(async () => {
    registry = await startFakeRegistry();
    f = await createRunFixture({ egressProxy: registry.egressProxy });
    // The devcontainer builds this same Dockerfile: Airlock's build reuses the engine's layer cache.
    await nodelessImage();
  }, 900_000);
  afterAll(async () => {
    await f?.close();
    await registry?.close();
  });

  it("boots the Go devcontainer's derived image: setup fetches through the allowlist, `go test` runs in the VM, the disk is cached, the run wiped", { timeout: 1_800_000 }, async () => {
    const setupUrl = `http://${FAKE_REGISTRY_HOST}:${registry.port}/${FAKE_PACKAGE.name}`;
    const projectDir = await f.project({
      ...GO_PROJECT,
      '.devcontainer/devcontainer.json': JSON.stringify({ build: { dockerfile: 'Dockerfile' }, postCreateCommand: `curl -fsS -o fetched-by-setup.json ${setupUrl} && echo "setup-token=[$ANTHROPIC_API_KEY]"` }),
      '.devcontainer/Dockerfile': NODELESS_DOCKERFILE,
    });
    f.upstream.setScript([
      {
        toolCalls: [
          {
            name: 'run_command',
            input: { command: 'echo "in-vm=$(cat /run/airlock-run-id)"; command -v node || echo no-node; echo "uid=$(id -u) home=$HOME"; grep -c airlock-fixture-pkg fetched-by-setup.json; go test ./... 2>&1; echo "go-exit=$?"' },
          },
        ],
      },
      { toolCalls: [{ name: 'finish', input: { summary: 'ran the tests' } }] },
    ]);
    const started = await f.services.runs.start(
      StartRunInput.parse({ projectDir, task: 'fix the failing test', provider: 'anthropic', model: 'claude-sonnet-4-5', isolation: 'vm', environment: 'devcontainer', trustEnvironment: true, setupAllowlist: [`${FAKE_REGISTRY_HOST}:${registry.port}`], limits: { timeoutSec: 1500 } }),
    );
    const run = await f.core.runs.wait(started.id);
    expect(run.error).toBeUndefined();
    expect(run.status).toBe('done');
    expect(run.sandbox.driver).toBe('qemu');

    // The VM booted the derived image: the record names it, and it is what the sandbox ran.
    const env = run.environment;
    expect(env?.name).toBe('devcontainer:.devcontainer/devcontainer.json');
    expect(env?.image).toMatch(/^airlock-env:/);
    expect(run.sandbox.image).toBe(env?.image);

    // Setup reached the registry stand-in through the allowlist, over the VM's channel, without the run token.
    expect(registry.requests).toContainEqual({ host: `${FAKE_REGISTRY_HOST}:${registry.port}`, path: `/${FAKE_PACKAGE.name}` });
    const log = await f.terminalLog(run.id);
    expect(log).toContain('── Setup (.devcontainer/devcontainer.json) ──');
    expect(log).toContain('setup-token=[]');

    // The agent's command ran in the VM, on the project's Go, and its output reached the model.
    const sent = f.upstream.requests.map((r) => JSON.stringify(r.body)).join('\n');
    expect(sent).toContain(`in-vm=${run.id}`);
    expect(sent).toContain('no-node');
    expect(sent).toContain('uid=1000 home=/home/airlock');
    expect(sent).toContain('Add(2, 3) = -1, want 5');
    expect(sent).toContain('FAIL\\texample.com/calc');
    expect(sent).toContain('go-exit=1');
    // What setup fetched is the agent's starting point, not its work.
    expect(run.changedFiles).toEqual([]);

    // The root disk is cached, made from this derived image's id; the run's own disks are gone.
    const paths = vmPaths(f.core.env);
    const metas = await Promise.all((await readdir(paths.baseDir)).filter((n) => n.endsWith('.json')).map(async (n) => JSON.parse(await readFile(path.join(paths.baseDir, n), 'utf8')) as { imageId: string }));
    expect(metas.map((m) => m.imageId)).toContain(env?.imageId);
    expect(run.wipe?.leftovers).toEqual([]);
    await expect(readdir(path.join(paths.runsDir, run.id))).rejects.toThrow();
    expect(await qemuProcessesOf(run.id)).toEqual([]);
  });
});
