import { execFile } from 'node:child_process';
import { appendFile, mkdtemp, readdir, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { root } from '../../scripts/build.mjs';
import { requirePrerequisite } from '../support/prerequisites';

/**
 * The npm package as a user gets it: `npm pack` (its prepack builds everything), `npm install -g`
 * of the tarball into a clean prefix (production dependencies only, from the local npm cache where it
 * can), then the installed `airlock` builds the sandbox image from the installed files and runs a
 * command in a sandbox. Nothing on that path is TypeScript, and neither tsx nor esbuild is installed.
 */
const docker = await requirePrerequisite('docker');

interface Result {
  code: number;
  stdout: string;
  stderr: string;
}

function run(cmd: string, args: string[], opts: { cwd?: string; env?: NodeJS.ProcessEnv } = {}): Promise<Result> {
  return new Promise((resolve) => {
    execFile(cmd, args, { cwd: opts.cwd, env: opts.env ?? process.env, maxBuffer: 64 * 1024 * 1024 }, (err, stdout, stderr) => {
      resolve({ code: err ? Number((err as { code?: unknown }).code ?? 1) || 1 : 0, stdout, stderr });
    });
  });
}

async function filesUnder(dir: string): Promise<string[]> {
  const out: string[] = [];
  for (const e of await readdir(dir, { withFileTypes: true, recursive: true })) {
    if (e.isFile()) out.push(path.relative(dir, path.join(e.parentPath, e.name)));
  }
  return out;
}

describe.skipIf(!docker.ok)('the npm package: pack, install -g into a clean prefix, run (real Docker)', () => {
  let tmp: string;
  let prefix: string;
  let pkgDir: string;
  let airlock: string;
  let env: NodeJS.ProcessEnv;
  let imageTag: string | undefined;
  // A marker in the installed helper gives this test an image tag of its own: doctor must build it
  // from the installed files (only the payload layer is new; the base layers come from the cache).
  const marker = `// packaging-test-${process.pid}-${Date.now()}`;

  beforeAll(async () => {
    tmp = await mkdtemp(path.join(os.tmpdir(), 'airlock-pack-'));
    prefix = path.join(tmp, 'prefix');
    const npmEnv = { ...process.env, npm_config_update_notifier: 'false', npm_config_fund: 'false', npm_config_audit: 'false' };
    const packed = await run('npm', ['pack', '--pack-destination', tmp], { cwd: root, env: npmEnv });
    expect(packed.code, packed.stderr).toBe(0);
    const tarballs = (await readdir(tmp)).filter((f) => f.endsWith('.tgz'));
    expect(tarballs).toHaveLength(1);
    const tarball = path.join(tmp, tarballs[0]!);
    // A clean prefix: production dependencies only (a global install never takes dev dependencies).
    const installed = await run('npm', ['install', '--global', '--prefix', prefix, '--omit=dev', '--prefer-offline', tarball], { cwd: tmp, env: npmEnv });
    expect(installed.code, installed.stderr).toBe(0);
    pkgDir = path.join(prefix, 'lib', 'node_modules', 'airlock');
    airlock = path.join(prefix, 'bin', 'airlock');
    env = {
      ...npmEnv,
      AIRLOCK_HOME: path.join(tmp, 'home'),
      // Only the prefix's bin and the system: nothing from the checkout's node_modules.
      PATH: [path.join(prefix, 'bin'), path.dirname(process.execPath), '/usr/local/bin', '/usr/bin', '/bin'].join(path.delimiter),
      NODE_OPTIONS: '',
      NODE_PATH: '',
    };
  }, 600_000);

  afterAll(async () => {
    if (imageTag) await run('docker', ['rmi', imageTag]);
    if (tmp) await rm(tmp, { recursive: true, force: true });
  });

  it('installs built JavaScript only: no TypeScript source, no tsx, no esbuild, no dev dependencies', async () => {
    const own = (await filesUnder(pkgDir)).filter((f) => !f.startsWith(`node_modules${path.sep}`));
    expect(own).toContain(path.join('out', 'cli', 'airlock.js'));
    expect(own).toContain(path.join('out', 'sandbox', 'helper.js'));
    expect(own).toContain(path.join('out', 'sandbox', 'agent', 'agent.js'));
    expect(own).toContain(path.join('out', 'renderer', 'index.html'));
    expect(own).toContain(path.join('resources', 'sandbox', 'Dockerfile'));
    expect(own).toContain(path.join('resources', 'vm', 'guest-init.sh'));
    expect(own.filter((f) => /\.(ts|tsx|mts|cts)$/.test(f))).toEqual([]);
    expect(own.filter((f) => /^(core|contracts|main|preload|renderer|test|bench|scripts)[/\\]/.test(f))).toEqual([]);
    const deps = await readdir(path.join(pkgDir, 'node_modules'));
    for (const dev of ['tsx', 'esbuild', 'typescript', 'vitest', 'electron', 'electron-builder', 'electron-vite', 'node']) expect(deps).not.toContain(dev);
    expect(deps).toEqual(expect.arrayContaining(['dockerode', 'ws', 'zod', 'tar-stream', 'ignore', '@napi-rs']));
  });

  it('airlock --version and --help answer from the installed bundle', async () => {
    const version = await run(airlock, ['--version'], { cwd: tmp, env });
    expect(version.code, version.stderr).toBe(0);
    expect(version.stdout.trim()).toMatch(/^airlock \d+\.\d+\.\d+/);
    const help = await run(airlock, ['--help'], { cwd: tmp, env });
    expect(help.code).toBe(0);
    expect(help.stdout).toContain('usage: airlock <command>');
  });

  it('airlock doctor builds the sandbox image from the installed files, and sandbox exec runs in it', async () => {
    await appendFile(path.join(pkgDir, 'out', 'sandbox', 'helper.js'), `\n${marker}\n`);
    const doctor = await run(airlock, ['doctor'], { cwd: tmp, env });
    imageTag = /airlock-sandbox:(?:amd64|arm64)-[0-9a-f]{20}/.exec(doctor.stdout + doctor.stderr)?.[0];
    expect(doctor.code, `${doctor.stdout}\n${doctor.stderr}`).toBe(0);
    expect(doctor.stdout + doctor.stderr).toMatch(/built airlock-sandbox:(?:amd64|arm64)-[0-9a-f]{20}|building airlock-sandbox:(?:amd64|arm64)-[0-9a-f]{20}/);

    const project = path.join(tmp, 'project');
    await run('mkdir', ['-p', project]);
    await writeFile(path.join(project, 'hello.txt'), 'hello\n');
    const exec = await run(airlock, ['sandbox', 'exec', project, '--', 'sh', '-c', 'tail -n 1 /opt/airlock/helper.js; echo "from the sandbox" >> hello.txt'], { cwd: tmp, env });
    expect(exec.code, `${exec.stdout}\n${exec.stderr}`).toBe(0);
    // The helper in the image is the installed file (with this test's marker).
    expect(exec.stdout).toContain(marker);
    expect(exec.stdout).toContain('+from the sandbox');
  });
});
