/**
 * RECORDED-BEHAVIOUR TESTS (no Lima here): outputs below follow Lima's documented formats
 * (`limactl list --json` = pkg/limatype/lima_instance.go Instance as JSON lines, its `config` the
 * pkg/limatype/lima_yaml.go LimaYAML after pkg/limayaml/defaults.go FillDefault, read at lima-vm/lima
 * 183a60d; nerdctl ps `{{json .}}` = docker-compatible keys). They were NOT captured on a real Mac;
 * see resources/vm/README.md.
 */
import { describe, expect, it } from 'vitest';
import { DEFAULT_LIMITS } from '../driver';
import {
  limaTemplateFor,
  limactlCreateArgs,
  limactlShellArgs,
  limaTemplate,
  limaContainerEnv,
  nerdctlExecHelperArgs,
  nerdctlImageEnvArgs,
  nerdctlPsArgs,
  nerdctlRunArgs,
  parseLimaList,
  parseNerdctlImageEnv,
  parseNerdctlPs,
} from './lima-cli';

// Shape of `limactl list --json` (Lima 1.x): one object per line.
const RECORDED_LIMA_LIST = [
  '{"name":"airlock","hostname":"lima-airlock","status":"Running","dir":"/Users/dev/.lima/airlock","vmType":"vz","arch":"aarch64","cpuType":"","cpus":4,"memory":4294967296,"disk":42949672960,"network":[{"vzNAT":false,"interface":"","metric":100}],"sshLocalPort":52137,"sshConfigFile":"/Users/dev/.lima/airlock/ssh.config","hostAgentPID":4242,"driverPID":4242,"config":{"vmType":"vz","mounts":[],"containerd":{"system":false,"user":true}},"sshAddress":"127.0.0.1","protected":false,"limaVersion":"1.0.3","HostOS":"darwin","HostArch":"aarch64","LimaHome":"/Users/dev/.lima","IdentityFile":"/Users/dev/.lima/_config/user"}',
  '{"name":"default","hostname":"lima-default","status":"Stopped","dir":"/Users/dev/.lima/default","vmType":"qemu","arch":"aarch64","cpuType":"","cpus":4,"memory":4294967296,"disk":107374182400,"config":{"mounts":[{"location":"~","writable":false},{"location":"/tmp/lima","writable":true}]},"protected":false,"limaVersion":"1.0.3"}',
].join('\n');

// Shape of `nerdctl ps --all --no-trunc --format '{{json .}}'`.
const RECORDED_NERDCTL_PS = [
  '{"Command":"\\"sleep infinity\\"","CreatedAt":"2026-11-29 22:10:01 +0000 UTC","ID":"3f1a9c0d5e6b7a8f9c0d1e2f3a4b5c6d7e8f9a0b1c2d3e4f5a6b7c8d9e0f1a2b","Image":"airlock-sandbox:9963fe55662cb967c679","Platform":"linux/arm64","Names":"airlock-r-abc-12345678","Ports":"","Status":"Up","Runtime":"io.containerd.runc.v2","Size":"","Labels":"airlock.kind=sandbox,airlock.run=r-abc-12345678"}',
].join('\n');

describe('Lima CLI (recorded behaviour, not run on a Mac)', () => {
  it('parses limactl list --json lines, including the mounts of the effective config', () => {
    const list = parseLimaList(RECORDED_LIMA_LIST);
    expect(list).toEqual([
      { name: 'airlock', status: 'Running', vmType: 'vz', arch: 'aarch64', cpus: 4, memory: 4294967296, disk: 42949672960, dir: '/Users/dev/.lima/airlock', mounts: 0, exposures: [] },
      { name: 'default', status: 'Stopped', vmType: 'qemu', arch: 'aarch64', cpus: 4, memory: 4294967296, disk: 107374182400, dir: '/Users/dev/.lima/default', mounts: 2, exposures: [] },
    ]);
    // Older limactl printed a JSON array; no instance prints nothing.
    expect(parseLimaList('[{"name":"x","status":"Stopped"}]').map((i) => i.name)).toEqual(['x']);
    expect(parseLimaList('\n')).toEqual([]);
  });

  it('parses nerdctl ps JSON lines with labels as docker-style k=v strings or objects', () => {
    const [c] = parseNerdctlPs(RECORDED_NERDCTL_PS);
    expect(c?.labels).toEqual({ 'airlock.kind': 'sandbox', 'airlock.run': 'r-abc-12345678' });
    expect(c?.name).toBe('airlock-r-abc-12345678');
    expect(parseNerdctlPs('{"ID":"a","Labels":{"airlock.run":"r1"}}')[0]?.labels).toEqual({ 'airlock.run': 'r1' });
    expect(parseNerdctlPs('time="..." level=warning msg="x"\n')).toEqual([]);
  });

  it('the VM takes the Mac’s architecture and is sized for concurrent runs from the Mac’s memory and cores', () => {
    const m1 = limaTemplateFor({ memoryBytes: 16 * 1024 ** 3, cpus: 10, arch: 'arm64' });
    expect(m1).toMatchObject({ arch: 'aarch64', memoryGiB: 8, cpus: 5 });
    expect(limaTemplate(m1)).toMatch(/^arch: aarch64$/m);
    expect(limaTemplate(m1)).toMatch(/^memory: "8GiB"$/m);
    expect(limaTemplateFor({ memoryBytes: 8 * 1024 ** 3, cpus: 4, arch: 'x64' })).toMatchObject({ arch: 'x86_64', memoryGiB: 4, cpus: 2 });
    expect(limaTemplateFor({ memoryBytes: 128 * 1024 ** 3, cpus: 32, arch: 'arm64' })).toMatchObject({ memoryGiB: 16, cpus: 8 });
    // The guard against the Mac's loopback (host.lima.internal) is provisioned at every boot.
    expect(limaTemplate(m1)).toMatch(/provision:\n- mode: system[\s\S]*ip daddr 192\.168\.5\.2 ct state new reject/);
  });

  it('the template shares nothing of the Mac: no mounts, every port ignored, no agent, no proxy env', () => {
    const y = limaTemplate();
    expect(y).toMatch(/^mounts: \[\]$/m);
    expect(y).toMatch(/guestIP: "0\.0\.0\.0"\n\s+guestPortRange: \[1, 65535\]\n\s+proto: any\n\s+ignore: true/);
    expect(y).toMatch(/guestIP: "127\.0\.0\.1"\n\s+guestPortRange: \[1, 65535\]\n\s+proto: any\n\s+ignore: true/);
    expect(y).toMatch(/forwardAgent: false/);
    expect(y).toMatch(/loadDotSSHPubKeys: false/);
    expect(y).toMatch(/propagateProxyEnv: false/);
    expect(y).toMatch(/containerd:\n\s+system: false\n\s+user: true/);
  });

  it('builds limactl and nerdctl command lines', () => {
    expect(limactlCreateArgs('/tmp/a.yaml')).toEqual(['create', '--name=airlock', '--tty=false', '/tmp/a.yaml']);
    expect(limactlShellArgs(['nerdctl', 'ps'])).toEqual(['shell', '--workdir', '/', 'airlock', 'nerdctl', 'ps']);
    // The helper as root (the container's four capabilities, no-new-privileges), told which user its commands run as.
    // Airlock's own loader and Node by absolute path, never a `node` from the image's PATH (§2.3).
    expect(nerdctlExecHelperArgs('c1')).toEqual(['nerdctl', 'exec', '--interactive', '--user', '0:0', '--env', 'AIRLOCK_AGENT_USER=1000:1000', '--workdir', '/workspace', 'c1',
      '/opt/airlock/lib/ld.so', '--inhibit-cache', '--library-path', '/opt/airlock/lib', '/opt/airlock/node/node', '--openssl-config=/dev/null', '/opt/airlock/helper.js']);
    expect(nerdctlPsArgs('r-1')).toContain('label=airlock.run=r-1');
    expect(nerdctlPsArgs()).toContain('label=airlock.run');
  });

  it('runs each sandbox container hardened like the Docker driver, root with only the helper\'s four capabilities', () => {
    const args = nerdctlRunArgs({ runId: 'r-1', image: 'airlock-sandbox:x', limits: { ...DEFAULT_LIMITS, memoryBytes: 2 * 1024 ** 3, cpus: 1.5, pids: 300 } });
    const pairs = (flag: string) => args.flatMap((a, i) => (a === flag ? [args[i + 1]] : []));
    expect(pairs('--network')).toEqual(['none']);
    expect(args).toContain('--read-only');
    expect(pairs('--cap-drop')).toEqual(['ALL']);
    // Exactly the Docker driver's helper capabilities (container-config.ts HELPER_CAPS), nothing else.
    expect(pairs('--cap-add')).toEqual(['SETUID', 'SETGID', 'KILL']);
    expect(args.indexOf('--cap-drop')).toBeLessThan(args.indexOf('--cap-add'));
    expect(pairs('--security-opt')).toEqual(['no-new-privileges']);
    expect(pairs('--pids-limit')).toEqual(['300']);
    expect(pairs('--memory')).toEqual(['2048m']);
    expect(pairs('--cpus')).toEqual(['1.5']);
    // Root as the container's user (the helper's; `sleep` out of the agent's reach); the agent's home stays the agent's.
    expect(pairs('--user')).toEqual(['0:0']);
    expect(pairs('--tmpfs')[1]).toBe('/home/airlock:rw,nosuid,nodev,size=512m,uid=1000,gid=1000,mode=0755');
    // Airlock's fixed environment only (the agent's user is the helper exec's own).
    expect(pairs('--env')).toEqual(['HOME=/home/airlock', 'LANG=C.UTF-8', 'PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin']);
    expect(pairs('--label')).toEqual(['airlock.run=r-1', 'airlock.kind=sandbox']);
    // Scratch only on tmpfs (noexec by nerdctl's default, as Docker's); the workspace and state on the run's own named volumes, no host path.
    expect(pairs('--tmpfs').map((t) => t?.split(':')[0])).toEqual(['/tmp', '/home/airlock']);
    // The run's volumes, and an empty /etc/ld.so.preload (the VM's /dev/null) in place of the image's.
    expect(pairs('--volume')).toEqual(['airlock-r-1-workspace:/workspace', 'airlock-r-1-state:/airlock', '/dev/null:/etc/ld.so.preload:ro']);
    expect(args).not.toContain('--privileged');
    expect(args.join(' ')).not.toMatch(/-v |--mount|-p |--publish/);
    // The container's own process is Airlock's Node idling through Airlock's loader: no image ENTRYPOINT, no image `sleep`.
    expect(pairs('--entrypoint')).toEqual(['/opt/airlock/lib/ld.so']);
    expect(args.slice(args.indexOf('airlock-sandbox:x'))).toEqual(['airlock-sandbox:x', '--inhibit-cache', '--library-path', '/opt/airlock/lib', '/opt/airlock/node/node', '--openssl-config=/dev/null', '-e', 'setInterval(() => {}, 2 ** 30)']);
  });

  it("takes every name of the image's ENV out of the helper's environment (set empty), keeping Airlock's", () => {
    const imageEnv = ['PATH=/evil/bin:/usr/bin', 'NODE_OPTIONS=--require /x.js', 'LD_PRELOAD=/x.so', 'NODE_PATH=/x', 'HOME=/root', 'LANG=xx', 'WEIRD=a=b', 'NODE_OPTIONS=again'];
    const args = nerdctlRunArgs({ runId: 'r-1', image: 'img', limits: DEFAULT_LIMITS, imageEnv });
    const envs = args.flatMap((a, i) => (a === '--env' ? [args[i + 1]] : []));
    expect(envs).toEqual(['HOME=/home/airlock', 'LANG=C.UTF-8', 'PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin', 'NODE_OPTIONS=', 'LD_PRELOAD=', 'NODE_PATH=', 'WEIRD=']);
    expect(limaContainerEnv()).toEqual(envs.slice(0, 3));
  });

  it("reads the image's ENV from nerdctl's dockercompat inspect", () => {
    expect(nerdctlImageEnvArgs('img:1')).toEqual(['nerdctl', 'image', 'inspect', '--mode', 'dockercompat', '--format', '{{json .Config.Env}}', 'img:1']);
    expect(parseNerdctlImageEnv('["PATH=/usr/bin","NODE_OPTIONS=--require /x.js"]\n')).toEqual(['PATH=/usr/bin', 'NODE_OPTIONS=--require /x.js']);
    expect(parseNerdctlImageEnv('null\n')).toEqual([]);
    expect(() => parseNerdctlImageEnv('{"a":1}')).toThrow(/unexpected image ENV/);
  });
});
