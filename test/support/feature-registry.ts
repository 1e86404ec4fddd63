import { spawn, execFile, type ChildProcess } from 'node:child_process';
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';

/**
 * A real OCI registry on loopback for published devcontainer features (docs/architecture.md §16):
 * Debian's `docker-registry` on a free 127.0.0.1 port with a temporary storage folder, and features
 * published to it with the reference CLI's own `devcontainer features publish`.
 */
export interface LoopbackRegistry {
  /** `localhost:PORT` (the reference speaks plain HTTP to `localhost` only). */
  host: string;
  /** Publishes one feature folder (devcontainer-feature.json + install.sh) under `airlock-test/<id>`; returns its manifest digest. */
  publish(id: string, files: Record<string, string>): Promise<string>;
  close(): Promise<void>;
}

export async function hasDockerRegistry(): Promise<boolean> {
  return promisify(execFile)('docker-registry', ['--version']).then(
    () => true,
    () => false,
  );
}

export async function startLoopbackRegistry(): Promise<LoopbackRegistry> {
  const dir = await mkdtemp(path.join(os.tmpdir(), 'airlock-registry-'));
  await writeFile(path.join(dir, 'config.yml'), `version: 0.1\nstorage:\n  filesystem:\n    rootdirectory: ${dir}/store\nhttp:\n  addr: 127.0.0.1:0\n`);
  const child: ChildProcess = spawn('docker-registry', ['serve', path.join(dir, 'config.yml')], { stdio: ['ignore', 'pipe', 'pipe'] });
  const port = await new Promise<number>((resolve, reject) => {
    let log = '';
    const onData = (b: Buffer): void => {
      log += b.toString();
      const m = /listening on 127\.0\.0\.1:(\d+)/.exec(log);
      if (m) resolve(Number(m[1]));
    };
    child.stdout?.on('data', onData);
    child.stderr?.on('data', onData);
    child.once('exit', (code) => reject(new Error(`docker-registry exited (${code}): ${log}`)));
  });
  const host = `localhost:${port}`;
  const cli = path.resolve('node_modules/.bin/devcontainer');
  return {
    host,
    async publish(id, files) {
      const src = path.join(dir, 'src', `${id}-${Date.now()}`);
      await mkdir(path.join(src, id), { recursive: true });
      for (const [name, text] of Object.entries(files)) await writeFile(path.join(src, id, name), text, { mode: name.endsWith('.sh') ? 0o755 : 0o644 });
      // An empty HOME and DOCKER_CONFIG: the reference would read a registry login from there.
      const home = path.join(dir, 'home');
      await mkdir(home, { recursive: true });
      const { stdout } = await promisify(execFile)(cli, ['features', 'publish', src, '--registry', host, '--namespace', 'airlock-test'], { env: { PATH: process.env.PATH ?? '', HOME: home, DOCKER_CONFIG: path.join(home, '.docker') } });
      const out = JSON.parse(stdout.trim().split('\n').pop() ?? '{}') as Record<string, { digest: string }>;
      const digest = out[id]?.digest;
      if (!digest) throw new Error(`devcontainer features publish printed no digest for ${id}: ${stdout}`);
      return digest;
    },
    async close() {
      child.kill();
      await rm(dir, { recursive: true, force: true });
    },
  };
}
