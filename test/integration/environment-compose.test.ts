/**
 * docs/architecture.md §16, compose sidecars: a `dockerComposeFile` devcontainer's agent sandbox is
 * made from its `service`, and the other services run as hardened sidecars on the run's internal
 * network. Real Docker, the scripted fake upstream, a real Redis from Debian's packages built FROM
 * the locally seeded Debian. The project's own test queries the database from the agent's command
 * and its output reaches the model; neither the sandbox nor the sidecar has a route out; the key and
 * the run token are nowhere in the sidecar; the sidecar and the network go with the run's wipe.
 * The same on the rootful Podman engine (its Docker-compatible API), where the run's network has no
 * name service: the names come from /etc/hosts entries the engine writes, the healthcheck is run by
 * Airlock, and the bridge holds no host address.
 */
import { spawn } from 'node:child_process';
import { createHash } from 'node:crypto';
import type Docker from 'dockerode';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { AirlockError } from '../../contracts/errors';
import { engineBuild } from '../../core/environment/engine-build';
import { connectEngine, type Engine } from '../../core/sandbox/docker/engine';
import { buildContextTar } from '../../core/sandbox/image';
import { StartRunInput } from '../../contracts/runs';
import { sidecarContainerName, sidecarNetworkName } from '../../core/environment/compose-sidecars';
import { containerName } from '../../core/sandbox/docker/container-config';
import type { ScriptedTurn } from '../fixtures/fake-upstream';
import { airlockSeccompProfile } from '../../core/sandbox/docker/seccomp-profile';
import { podmanTestSocket, requirePrerequisite } from '../support/prerequisites';
import { CANARY_KEY, createRunFixture, exec, leftoversOf, type RunFixture } from '../support/run-fixture';

const docker = await requirePrerequisite('docker');
const podman = await requirePrerequisite('podman');
/** Each engine the sidecars run on, and its command line for `exec` into containers. */
const ENGINES = [
  { name: 'Docker', ok: docker.ok, cli: 'docker' as const, env: {} as Record<string, string> },
  // How a Podman user points Airlock at its socket: the podman choice and CONTAINER_HOST.
  { name: 'Podman', ok: podman.ok, cli: 'podman' as const, env: { AIRLOCK_ENGINE: 'podman', CONTAINER_HOST: `unix://${podmanTestSocket()}` } as Record<string, string> },
];

/** Redis (server and client) from Debian's packages: the database and the project's client in one image (one build, shared layers). */
const REDIS_DOCKERFILE = 'FROM debian:bookworm-slim\nRUN apt-get update && apt-get install -y --no-install-recommends redis-server && rm -rf /var/lib/apt/lists/*\n';

const COMPOSE = `# the project's own compose file, as VS Code would run it
x-redis: &redis
  build: { context: ., dockerfile: Dockerfile }
services:
  app:
    <<: *redis
    volumes: ["..:/workspaces/app:cached"]
    command: sleep infinity
  db:
    <<: *redis
    user: redis
    command: ["redis-server", "--bind", "0.0.0.0", "--protected-mode", "no", "--save", "", "--appendonly", "no", "--dir", "/tmp"]
    environment:
      FROM_HOST: "\${AIRLOCK_COMPOSE_HOST_VAR:-the-default}"
    ports: ["6379:6379"]
    privileged: true
    volumes: ["/:/host"]
    healthcheck: { test: ["CMD", "redis-cli", "ping"], interval: 1s, timeout: 3s, retries: 60 }
  unused:
    image: debian:bookworm-slim
`;

const HOST_VAR = 'compose-host-var-canary-91c2';

/** Runs a command with `input` on its stdin; resolves its stdout. */
function withStdin(cmd: string, args: string[], input: string): Promise<string> {
  return new Promise((resolve, reject) => {
    const p = spawn(cmd, args, { stdio: ['pipe', 'pipe', 'inherit'] });
    let out = '';
    p.stdout.on('data', (c: Buffer) => (out += c.toString('utf8')));
    p.on('error', reject);
    p.on('close', (code) => (code === 0 ? resolve(out) : reject(new Error(`${cmd} ${args.join(' ')} exited ${code}`))));
    p.stdin.end(input);
  });
}

/** Decodes the default route's gateway from /proc/net/route (bash, no extra tools). */
const GATEWAY = `h=$(awk '$2=="00000000"{print $3}' /proc/net/route); [ -n "$h" ] && gw=$((16#\${h:6:2})).$((16#\${h:4:2})).$((16#\${h:2:2})).$((16#\${h:0:2}))`;

for (const way of ENGINES) describe.skipIf(!way.ok)(`compose sidecars (real ${way.name}, fake upstream)`, () => {
  let f: RunFixture;
  let engine: Engine;
  let d: Docker;
  const cli = way.cli;
  /** A server on a network the test made, outside the run's: nothing of the run may reach it. */
  const outside = { net: `airlock-test-outside-${process.pid}`, name: `airlock-test-outside-srv-${process.pid}`, ip: '' };

  beforeAll(async () => {
    f = await createRunFixture({ env: { AIRLOCK_COMPOSE_HOST_VAR: HOST_VAR, ...way.env } });
    engine = await connectEngine({ ...process.env, ...way.env });
    d = engine.docker;
    // Through the engine's API, the same on both engines (their command lines differ).
    await d.createNetwork({ Name: outside.net, Labels: { 'airlock.test': 'compose' } });
    const redis = `airlock-test-redis:${createHash('sha256').update(REDIS_DOCKERFILE).digest('hex').slice(0, 16)}`;
    await engineBuild(d, { tag: redis, context: await buildContextTar(Buffer.from(REDIS_DOCKERFILE)), what: 'the Redis test image', emit: () => undefined }, (e) => new AirlockError('IMAGE_BUILD_FAILED', `${e.where}: ${e.error}\n${e.tail}`));
    const server = await d.createContainer({
      name: outside.name,
      Image: redis,
      Cmd: ['redis-server', '--bind', '0.0.0.0', '--protected-mode', 'no', '--save', ''],
      Labels: { 'airlock.test': 'compose' },
      HostConfig: { NetworkMode: outside.net, AutoRemove: true },
    });
    await server.start();
    outside.ip = ((await server.inspect()).NetworkSettings.Networks[outside.net] as { IPAddress: string }).IPAddress;
    expect(outside.ip).toMatch(/^\d+\.\d+\.\d+\.\d+$/);
    // The control: the outside server answers whoever is on its network.
    for (let i = 0; i < 200; i++) {
      if ((await exec(cli, ['exec', outside.name, 'redis-cli', '-h', outside.ip, 'ping']).catch(() => ({ stdout: '' }))).stdout.includes('PONG')) return;
      await new Promise((r) => setTimeout(r, 100));
    }
    throw new Error('the outside Redis never answered its own network');
  }, 900_000);
  afterAll(async () => {
    await d?.getContainer(outside.name).remove({ force: true }).catch(() => undefined);
    await d?.getNetwork(outside.net).remove().catch(() => undefined);
    engine?.dispose();
    await f?.close();
  });

  it("the agent's tests query the database sidecar; no route out; nothing secret in the sidecar; wiped with the network", async () => {
    const projectDir = await f.project({
      'test.sh': 'set -e\nredis-cli -h db set answer 42 >/dev/null\necho "db-answer=$(redis-cli -h db get answer)"\n',
      '.devcontainer/devcontainer.json': JSON.stringify({ name: 'redis app', dockerComposeFile: 'compose.yaml', service: 'app', runServices: ['db'], forwardPorts: [8080, 'db:6379'] }),
      '.devcontainer/compose.yaml': COMPOSE,
      '.devcontainer/Dockerfile': REDIS_DOCKERFILE,
    });
    const command = [
      'bash test.sh 2>&1; echo "test-exit=$?"',
      // From inside the sandbox: its interfaces and routes, a .invalid name, the gateway and a server outside the run.
      'echo "ifaces=$(ls /sys/class/net | tr "\\n" " ")"',
      `${GATEWAY}; echo "gateway=$gw"; timeout 5 bash -c "echo > /dev/tcp/$gw/6379" 2>/dev/null && echo gw-reached || echo gw-unreachable`,
      `timeout 5 redis-cli -h ${outside.ip} ping 2>&1 | grep -q PONG && echo outside-reached || echo outside-unreachable`,
      'getent hosts example.invalid >/dev/null && echo invalid-resolved || echo invalid-unresolved',
      // The test looks into the sidecar from here on.
      'touch /tmp/at-hold',
      // Hold the run while the test looks into the sidecar (a condition, bounded).
      'for i in $(seq 1 3000); do [ -e /tmp/probe-done ] && break; sleep 0.1; done; echo probe-wait-over',
    ].join('; ');
    const script: ScriptedTurn[] = [{ toolCalls: [{ name: 'run_command', input: { command } }] }, { toolCalls: [{ name: 'finish', input: { summary: 'ran the tests' } }] }];
    f.upstream.setScript(script);
    const started = await f.services.runs.start(StartRunInput.parse({ task: 'run the tests', provider: 'anthropic', model: 'claude-sonnet-4-5', projectDir, trustEnvironment: true }));
    const runId = started.id;
    const sidecar = sidecarContainerName(runId, 'db');
    const sandbox = containerName(runId);

    // Wait for the agent's command to reach its hold (it runs after the sidecar is ready); the run
    // token is then read from the agent process's environment (its commands never get it).
    let ended: string | undefined;
    const done = f.core.runs.wait(runId).then((r) => {
      ended = `${r.status}: ${r.error?.message ?? ''}`;
      return r;
    });
    let token = '';
    for (let i = 0; i < 6000 && !token; i++) {
      if (ended) throw new Error(`the run ended before its command ran: ${ended}\n${await f.terminalLog(runId).catch(() => '')}`);
      const held = await exec(cli, ['exec', sandbox, 'test', '-e', '/tmp/at-hold']).then(() => true, () => false);
      if (held) {
        const script = 'for p in /proc/[0-9]*; do tr "\\0" "\\n" < $p/environ 2>/dev/null | sed -n "s/^ANTHROPIC_API_KEY=//p"; done | head -n 1';
        // As the agent's user: the exec's default is the helper's root, which may not read the agent's environ (§2.3).
        token = (await exec(cli, ['exec', '-u', '1000:1000', sandbox, 'sh', '-c', script])).stdout.trim();
      }
      if (!token) await new Promise((r) => setTimeout(r, 100));
    }
    expect(token.length).toBeGreaterThan(20);

    // The sidecar as the engine runs it: hardened, on the run's network only, nothing published or mounted.
    const info = await d.getContainer(sidecar).inspect();
    const hc = info.HostConfig;
    // Podman's compatible answer lists the dropped capabilities one by one; the processes' own sets below are the proof on both.
    if (cli === 'docker') expect(hc.CapDrop).toEqual(['ALL']);
    expect(hc.CapAdd ?? []).toEqual([]);
    expect(hc.Privileged).toBe(false);
    // no-new-privileges and Airlock's own seccomp profile (docs/architecture.md §2.3): Docker keeps its JSON,
    // Podman the path of the private file it read it from.
    const opts: string[] = hc.SecurityOpt ?? [];
    expect(opts.filter((o) => !o.startsWith('seccomp='))).toEqual(['no-new-privileges']);
    const seccomp = opts.find((o) => o.startsWith('seccomp='))?.slice('seccomp='.length) ?? '';
    // A root sidecar's profile also allows the calls of the capabilities it holds (compose-sidecars.ts).
    if (cli === 'docker') expect((JSON.parse(seccomp) as { syscalls: unknown[] }).syscalls.slice(1)).toEqual(airlockSeccompProfile().syscalls.slice(1));
    else expect(seccomp).toMatch(/airlock-seccomp-.*\/profile\.json$/);
    expect(hc.ReadonlyRootfs).toBe(true);
    expect(hc.Binds ?? []).toEqual([]);
    expect(info.Mounts).toEqual([]);
    expect(hc.PortBindings ?? {}).toEqual({});
    expect(hc.Memory).toBeGreaterThan(0);
    expect(hc.PidsLimit).toBeGreaterThan(0);
    expect(Object.keys(info.NetworkSettings.Networks)).toEqual([sidecarNetworkName(runId)]);
    expect(info.Config.User).toBe('redis');
    expect(info.Config.Env).toContain('FROM_HOST=the-default');
    const net = await d.getNetwork(sidecarNetworkName(runId)).inspect();
    expect(net.Internal).toBe(true);
    // The host holds no address on the run's bridge: Docker's gateway answers nobody; Podman's has none at all.
    const ipam = net.IPAM?.Config?.[0] ?? {};
    const gateway = ipam.Gateway ?? '';
    const hostAddrs = (await exec('ip', ['-4', '-o', 'addr'])).stdout;
    if (cli === 'docker') expect(hostAddrs).not.toContain(` ${gateway}/`);
    else {
      expect(gateway).not.toMatch(/^\d+\.\d+\.\d+\.\d+$/);
      expect(ipam.Subnet).toMatch(/^\d+\.\d+\.\d+\.\d+\/\d+$/);
      const subnet = (ipam.Subnet ?? '').replace(/\.\d+\/\d+$/, '.');
      expect(hostAddrs).not.toContain(` ${subnet}`);
    }
    // The sandbox is on that network and no other.
    const sb = await d.getContainer(sandbox).inspect();
    expect(Object.keys(sb.NetworkSettings.Networks)).toEqual([sidecarNetworkName(runId)]);
    if (cli === 'docker') {
      // No DNS leaves (CVE-2024-29018, Docker before 26.0.0): the embedded resolver's only upstream,
      // for the sandbox and every sidecar, is the run network's gateway address — reserved by the
      // engine's IPAM (no container gets it), held by no host interface (above) — never the host's
      // resolvers, which a loopback resolver would have the engine ask from the host's namespace.
      for (const c of [hc, sb.HostConfig]) {
        expect(c.Dns).toEqual([gateway]);
        expect(c.DnsSearch).toEqual(['.']);
        expect(c.DnsOptions).toEqual(['timeout:1', 'attempts:1']);
      }
      expect(gateway).toMatch(/^\d+\.\d+\.\d+\.\d+$/);
      expect(gateway.startsWith('127.')).toBe(false);
      // What the containers' libc is told: the engine's resolver, failing fast.
      expect((await exec(cli, ['exec', sidecar, 'cat', '/etc/resolv.conf'])).stdout).toMatch(/options timeout:1 attempts:1/);
    }
    // Every process of the sidecar: no capabilities (it starts as its own user), no new privileges.
    const inSidecar = async (sh: string) => (await exec(cli, ['exec', sidecar, 'bash', '-c', sh])).stdout;
    // Not the engine's own exec while it starts (the healthcheck Airlock runs every second): runc's (or crun's) init
    // holds capabilities until it execs the command with the container's set, so it is left out by name.
    const ofEvery = (field: string) => `for p in /proc/[0-9]*; do case "$(cat $p/comm 2>/dev/null)" in runc*|crun*|'') continue;; esac; grep -h '^${field}' $p/status 2>/dev/null; done | sort -u`;
    expect((await inSidecar(ofEvery('CapEff'))).trim()).toBe('CapEff:\t0000000000000000');
    expect((await inSidecar(ofEvery('NoNewPrivs'))).trim()).toBe('NoNewPrivs:\t1');

    // From inside the sidecar: no route out either, and neither the key nor the run token anywhere.
    expect(await inSidecar(`timeout 5 redis-cli -h ${outside.ip} ping 2>&1 | grep -q PONG && echo outside-reached || echo outside-unreachable`)).toContain('outside-unreachable');
    expect(await inSidecar(`${GATEWAY}; timeout 5 bash -c "echo > /dev/tcp/$gw/6379" 2>/dev/null && echo gw-reached || echo gw-unreachable`)).toContain('gw-unreachable');
    expect(await inSidecar('getent hosts example.invalid >/dev/null && echo invalid-resolved || echo invalid-unresolved')).toContain('invalid-unresolved');
    // The needles come in on stdin, so neither the scanning shell's argv nor its environment holds them.
    const scan = `while read -r n; do grep -rlsF -f <(printf '%s\\n' "$n") / --exclude-dir=proc --exclude-dir=sys --exclude-dir=dev; cat /proc/[0-9]*/environ /proc/[0-9]*/cmdline 2>/dev/null | grep -caF -f <(printf '%s\\n' "$n"); done; echo scanned`;
    const canaries = await withStdin(cli, ['exec', '-i', sidecar, 'bash', '-c', scan], `${CANARY_KEY}\n${token}\n`);
    expect(canaries.trim().split('\n')).toEqual(['0', '0', 'scanned']);
    // The control: the same process scan finds the token in the agent's own sandbox (its agent process holds it).
    const control = await withStdin(cli, ['exec', '-i', '-u', '1000:1000', sandbox, 'bash', '-c', `read -r n; cat /proc/[0-9]*/environ 2>/dev/null | grep -caF -f <(printf '%s\\n' "$n")`], `${token}\n`);
    expect(Number(control.trim())).toBeGreaterThan(0);
    expect(JSON.stringify(info)).not.toContain(token);
    expect(JSON.stringify(info)).not.toContain(CANARY_KEY);
    expect(JSON.stringify(info)).not.toContain(HOST_VAR);

    await exec(cli, ['exec', '-u', '1000:1000', sandbox, 'touch', '/tmp/probe-done']);
    const run = await done;
    expect(run.error).toBeUndefined();
    expect(run.status).toBe('done');

    const sent = f.upstream.requests.map((r) => JSON.stringify(r.body)).join('\n');
    // The project's own test, against the real database, from the agent's command.
    expect(sent).toContain('db-answer=42');
    expect(sent).toContain('test-exit=0');
    // Only loopback and the run's network; the gateway and the outside server unreachable; no outside names.
    expect(sent).toContain('ifaces=eth0 lo ');
    // Docker writes a default route to a gateway nobody holds; Podman's internal network has no default route.
    expect(sent).toContain(cli === 'docker' ? `gateway=${gateway}` : 'gateway=\\n');
    expect(sent).toContain('gw-unreachable');
    expect(sent).toContain('outside-unreachable');
    expect(sent).toContain('invalid-unresolved');
    expect(sent).not.toContain(HOST_VAR);

    // The record: the sidecars, the forwarded ports, and what was not applied (and why).
    expect(run.environment?.sidecars).toEqual([{ service: 'db', image: expect.stringMatching(/^airlock-env-base:svc-db-/) }]);
    // The sandbox's own port is offered; the sidecar's is not, and the record says why.
    expect(run.environment?.forwardPorts).toEqual([8080]);
    const fields = run.environment?.notApplied.map((n) => n.field) ?? [];
    expect(fields).toEqual(expect.arrayContaining(['compose ${AIRLOCK_COMPOSE_HOST_VAR}', 'services.db.ports', 'services.db.privileged', 'services.db.volumes', 'services.app.volumes', 'forwardPorts "db:6379"']));
    expect(run.environment?.notApplied.find((n) => n.field === 'forwardPorts "db:6379"')?.reason).toMatch(/internal network/);

    // Wiped with the run: the sidecar and the network too, verified by label and by name.
    expect(run.wipe?.verified).toBe(true);
    expect(run.wipe?.removed).toEqual(expect.arrayContaining([`network:${sidecarNetworkName(runId)}`]));
    expect(await leftoversOf(runId, cli)).toEqual([]);
    expect(await d.listNetworks({ filters: { label: [`airlock.run=${runId}`] } })).toEqual([]);
    expect((await d.listNetworks()).map((n) => n.Name)).not.toContain(sidecarNetworkName(runId));
    await expect(d.getContainer(sidecar).inspect()).rejects.toThrow();
    // The service not in runServices never ran.
    expect(await d.listContainers({ all: true, filters: { name: [sidecarContainerName(runId, 'unused')] } })).toEqual([]);
  }, 600_000);

  it("a service that does not come up fails the run before the agent with its output; a VM or the open policy is refused; nothing is left", async () => {
    const calls = f.upstream.requests.length;
    const compose = (db: string) =>
      f.project({
        '.devcontainer/devcontainer.json': JSON.stringify({ dockerComposeFile: 'compose.yaml', service: 'app' }),
        '.devcontainer/compose.yaml': `services:\n  app:\n    image: debian:bookworm-slim\n  db:\n    image: debian:bookworm-slim\n${db}`,
      });
    const startOn = (projectDir: string, extra: Partial<StartRunInput> = {}) =>
      f.services.runs.start(StartRunInput.parse({ task: 'run the tests', provider: 'anthropic', model: 'claude-sonnet-4-5', projectDir, trustEnvironment: true, ...extra }));

    // It exits while its healthcheck has not passed yet (one without a healthcheck is ready once it runs).
    const exits = await f.core.runs.wait(
      (await startOn(await compose('    command: ["sh", "-c", "sleep 1; echo db-could-not-start >&2; exit 3"]\n    healthcheck: { test: ["CMD-SHELL", "exit 1"], interval: 5s, timeout: 2s, retries: 10 }\n'))).id,
    );
    expect(exits.status).toBe('failed');
    expect(exits.error?.kind).toBe('SANDBOX_FAILED');
    expect(exits.error?.message).toMatch(/^The compose service 'db' \(debian:bookworm-slim\) exited with status 3; the agent was not started\.[\s\S]*db-could-not-start/);
    const unhealthy = await f.core.runs.wait(
      (await startOn(await compose('    command: ["sleep", "600"]\n    healthcheck: { test: ["CMD-SHELL", "echo not-ready; exit 1"], interval: 1s, timeout: 2s, retries: 2 }\n'))).id,
    );
    expect(unhealthy.error?.message).toMatch(/^The compose service 'db' \(debian:bookworm-slim\) its healthcheck failed/);
    for (const run of [exits, unhealthy]) {
      expect(run.wipe?.verified).toBe(true);
      expect(await leftoversOf(run.id, cli)).toEqual([]);
      expect(await d.listNetworks({ filters: { label: [`airlock.run=${run.id}`] } })).toEqual([]);
    }

    const healthy = await compose('    command: ["sleep", "600"]\n');
    const vm = await f.core.runs.wait((await startOn(healthy, { isolation: 'vm' })).id);
    expect(vm.error?.message).toMatch(/^Compose services \(sidecars\) run as containers beside a container sandbox; --isolation vm has none/);
    const open = await f.core.runs.wait((await startOn(healthy, { network: 'open' })).id);
    expect(open.error?.message).toMatch(/^Compose services run on the run's internal network, which the open network policy would leave/);
    for (const run of [vm, open]) {
      expect(await leftoversOf(run.id, cli)).toEqual([]);
      expect(await d.listNetworks({ filters: { label: [`airlock.run=${run.id}`] } })).toEqual([]);
    }
    expect(f.upstream.requests.length).toBe(calls);
  }, 600_000);
});
