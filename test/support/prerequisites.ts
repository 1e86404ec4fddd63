import { spawn } from 'node:child_process';
import { access } from 'node:fs/promises';
import { request } from 'node:http';

export type Prerequisite = 'docker' | 'keychain' | 'chromium' | 'qemu' | 'sshd' | 'openssl' | 'runsc' | 'podman' | 'podman-rootless' | 'host-agent-clis' | 'netns' | 'private-dockerd';

/** Where the host copies of Claude Code and Codex live for the MCP client tests (scripts/ci-setup.sh installs them). */
export function hostAgentClisDir(): string {
  return process.env.AIRLOCK_TEST_AGENT_CLIS || '/opt/airlock-test-clis';
}

/** The Podman API socket the Podman tests use (`AIRLOCK_TEST_PODMAN_SOCKET`, else the rootful one). */
export function podmanTestSocket(): string {
  return process.env.AIRLOCK_TEST_PODMAN_SOCKET || '/run/podman/podman.sock';
}

/** A rootless Podman's API socket, served by a user of its own (`AIRLOCK_TEST_PODMAN_ROOTLESS_SOCKET`; scripts/ci-setup.sh starts it). */
export function rootlessPodmanTestSocket(): string {
  return process.env.AIRLOCK_TEST_PODMAN_ROOTLESS_SOCKET || '/run/airlock-rl/podman/podman.sock';
}

/** GET `path` on a unix socket; the body, or undefined when nothing answers. */
function getOnSocket(socketPath: string, path: string, timeoutMs = 10_000): Promise<string | undefined> {
  return new Promise((resolve) => {
    const req = request({ socketPath, path, timeout: timeoutMs }, (res) => {
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (c: string) => (body += c));
      res.on('end', () => resolve(res.statusCode === 200 ? body : undefined));
    });
    req.on('error', () => resolve(undefined));
    req.on('timeout', () => req.destroy());
    req.end();
  });
}

export interface PrerequisiteStatus {
  ok: boolean;
  reason: string;
}

function probe(cmd: string, args: string[], timeoutMs = 15_000): Promise<boolean> {
  return new Promise((resolve) => {
    const child = spawn(cmd, args, { stdio: 'ignore' });
    const timer = setTimeout(() => child.kill('SIGKILL'), timeoutMs);
    child.on('error', () => { clearTimeout(timer); resolve(false); });
    child.on('exit', (code) => { clearTimeout(timer); resolve(code === 0); });
  });
}

async function check(name: Prerequisite): Promise<PrerequisiteStatus> {
  switch (name) {
    case 'docker':
      return (await probe('docker', ['info']))
        ? { ok: true, reason: '' }
        : { ok: false, reason: 'no Docker engine answers (start dockerd, or run .ci/run to install one)' };
    case 'keychain':
      return process.env.DBUS_SESSION_BUS_ADDRESS
        ? { ok: true, reason: '' }
        : { ok: false, reason: 'no D-Bus session with a Secret Service (run the tests with `npm test`, which starts gnome-keyring)' };
    case 'chromium':
      try {
        await access(process.env.AIRLOCK_CHROMIUM ?? '/usr/bin/chromium');
        return { ok: true, reason: '' };
      } catch {
        return { ok: false, reason: 'Chromium not found at /usr/bin/chromium (apt-get install chromium)' };
      }
    case 'sshd':
      try {
        await access('/usr/sbin/sshd');
        await access('/usr/bin/ssh-keygen');
        return { ok: true, reason: '' };
      } catch {
        return { ok: false, reason: 'OpenSSH server/client not installed (apt-get install openssh-server openssh-client; scripts/ci-setup.sh does)' };
      }
    case 'openssl':
      return (await probe('openssl', ['version']))
        ? { ok: true, reason: '' }
        : { ok: false, reason: 'openssl not installed (apt-get install openssl; scripts/ci-setup.sh does)' };
    case 'runsc': {
      const info = await getOnSocket('/var/run/docker.sock', '/info');
      const runtimes = info ? Object.keys((JSON.parse(info) as { Runtimes?: Record<string, unknown> }).Runtimes ?? {}) : [];
      return runtimes.includes('runsc')
        ? { ok: true, reason: '' }
        : { ok: false, reason: 'the Docker engine has no runsc runtime (apt-get install runsc and register it in /etc/docker/daemon.json; scripts/ci-setup.sh does)' };
    }
    case 'podman':
      return (await getOnSocket(podmanTestSocket(), '/_ping')) === 'OK'
        ? { ok: true, reason: '' }
        : { ok: false, reason: `no Podman API service answers on ${podmanTestSocket()} (podman system service --time=0 unix://${podmanTestSocket()} &; scripts/ci-setup.sh starts one; AIRLOCK_TEST_PODMAN_SOCKET picks another)` };
    case 'podman-rootless':
      return (await getOnSocket(rootlessPodmanTestSocket(), '/_ping')) === 'OK'
        ? { ok: true, reason: '' }
        : { ok: false, reason: `no rootless Podman API service answers on ${rootlessPodmanTestSocket()} (scripts/ci-setup.sh starts one as the user airlock-rl; AIRLOCK_TEST_PODMAN_ROOTLESS_SOCKET picks another)` };
    case 'host-agent-clis': {
      const bin = `${hostAgentClisDir()}/node_modules/.bin`;
      return (await probe(`${bin}/claude`, ['--version'])) && (await probe(`${bin}/codex`, ['--version']))
        ? { ok: true, reason: '' }
        : { ok: false, reason: `Claude Code and Codex are not installed under ${hostAgentClisDir()} (npm install --prefix ${hostAgentClisDir()} @anthropic-ai/claude-code @openai/codex; scripts/ci-setup.sh does; AIRLOCK_TEST_AGENT_CLIS picks another prefix)` };
    }
    case 'netns':
      // Network namespaces the test makes (a private address of its own): root and iproute2.
      return process.getuid?.() === 0 && (await probe('ip', ['netns', 'list']))
        ? { ok: true, reason: '' }
        : { ok: false, reason: 'making a network namespace needs root and iproute2 (apt-get install iproute2; run the tests as root, as CI does)' };
    case 'private-dockerd':
      // A second Docker engine the test starts in mount and network namespaces of its own: root, unshare, dockerd.
      return process.getuid?.() === 0 && (await probe('unshare', ['--version'])) && (await probe('dockerd', ['--version']))
        ? { ok: true, reason: '' }
        : { ok: false, reason: 'starting a private Docker engine in namespaces of its own needs root, unshare (util-linux) and dockerd (apt-get install docker.io; run the tests as root, as CI does)' };
    case 'qemu':
      return (await probe('qemu-system-x86_64', ['--version']))
        ? { ok: true, reason: '' }
        : { ok: false, reason: 'qemu-system-x86_64 not installed (apt-get install qemu-system-x86 qemu-utils)' };
  }
}

/**
 * Checks that a real component a test needs is present. Under CI (`CI=true`) a missing one throws,
 * so the suite fails instead of skipping; elsewhere the caller skips with the returned reason.
 */
export async function requirePrerequisite(name: Prerequisite): Promise<PrerequisiteStatus> {
  const status = await check(name);
  if (!status.ok && process.env.CI) {
    throw new Error(`CI needs ${name}: ${status.reason}`);
  }
  if (!status.ok) console.warn(`skipping ${name} tests: ${status.reason}`);
  return status;
}
