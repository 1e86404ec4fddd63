/**
 * docs/architecture.md §16, "Behind a TLS proxy": the CAs the host adds beyond the public ones reach
 * every derived image — its system store where it has one, and NODE_EXTRA_CA_CERTS, SSL_CERT_FILE,
 * REQUESTS_CA_BUNDLE, GIT_SSL_CAINFO, CURL_CA_BUNDLE — taken from Airlock's own image, which carries
 * them. A test CA stands in for a company's: Airlock's image plus that CA is the runtime's source, and
 * inside the derived sandbox (no network) curl, Python and Node reach a server on the container's own
 * loopback whose certificate that CA signed.
 */
import { mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { AirlockError } from '../../contracts/errors';
import { deriveSandboxImage } from '../../core/environment/derived-image';
import { engineBuild } from '../../core/environment/engine-build';
import { parseEnvironmentChoice, resolveEnvironment } from '../../core/environment/environment-choice';
import { prepareEnvironmentImage } from '../../core/environment/environment-image';
import { LABEL_HOST_CA } from '../../core/sandbox/labels';
import { AIRLOCK_IMAGE_ENV } from '../../core/environment/run-environment';
import { tlsFailureHint } from '../../core/environment/tls-failure';
import { connectEngine } from '../../core/sandbox/docker/engine';
import { buildContextTar } from '../../core/sandbox/image';
import { nodelessImage } from '../support/environment-images';
import { requirePrerequisite } from '../support/prerequisites';
import { exec } from '../support/run-fixture';
import { sandboxImage } from './sandbox-support';

const docker = await requirePrerequisite('docker');
const LABEL = `airlock.test=environment-ca-${process.pid}`;

describe.skipIf(!docker.ok)("the host's extra CAs in derived images (real Docker)", () => {
  let dir: string;
  let airlockWithCa: string;
  let caPem: string;
  let serverKey: string;
  let serverCert: string;
  const made: string[] = [];

  beforeAll(async () => {
    dir = await mkdtemp(path.join(os.tmpdir(), 'airlock-ca-'));
    const o = (args: string[]) => exec('openssl', args, { cwd: dir });
    await o(['req', '-x509', '-newkey', 'rsa:2048', '-nodes', '-days', '2', '-subj', '/CN=Airlock test company CA', '-keyout', 'ca.key', '-out', 'ca.crt']);
    await o(['req', '-newkey', 'rsa:2048', '-nodes', '-subj', '/CN=localhost', '-keyout', 'server.key', '-out', 'server.csr']);
    await exec('sh', ['-c', 'printf "subjectAltName=DNS:localhost\\n" > ext.cnf'], { cwd: dir });
    await o(['x509', '-req', '-in', 'server.csr', '-CA', 'ca.crt', '-CAkey', 'ca.key', '-CAcreateserial', '-days', '2', '-extfile', 'ext.cnf', '-out', 'server.crt']);
    [caPem, serverKey, serverCert] = await Promise.all(['ca.crt', 'server.key', 'server.crt'].map((f) => readFile(path.join(dir, f), 'utf8'))) as [string, string, string];
    // Airlock's image as a machine with this company CA would build it (core/sandbox/image.ts puts the host's extras there).
    const engine = await connectEngine(process.env);
    const base = await sandboxImage();
    airlockWithCa = `airlock-test-ca-runtime:${process.pid}`;
    await engineBuild(
      engine.docker,
      { tag: airlockWithCa, context: await buildContextTar(Buffer.from(`FROM ${base}\nUSER 0:0\nCOPY payload/company-ca.crt /usr/local/share/ca-certificates/airlock-host/company-ca.crt\nRUN update-ca-certificates >/dev/null 2>&1\n`), { files: { 'company-ca.crt': Buffer.from(caPem) }, hash: '' }), labels: { 'airlock.test': `environment-ca-${process.pid}`, [LABEL_HOST_CA]: '1' }, what: 'a runtime image with a test CA', emit: () => undefined },
      (f) => new AirlockError('IMAGE_BUILD_FAILED', `${f.error}\n${f.tail}`),
    );
    made.push(airlockWithCa);
  }, 600_000);
  afterAll(async () => {
    for (const ref of made.reverse()) await exec('docker', ['rmi', '-f', ref]).catch(() => undefined);
    await exec('sh', ['-c', `docker images -q --filter label=${LABEL} | xargs -r docker rmi -f`]).catch(() => undefined);
    if (dir) await rm(dir, { recursive: true, force: true });
  });

  /** Runs a script in a hardened-ish container of the image: uid 1000, no network, the server's key and certificate in its environment. */
  async function inside(image: string, script: string): Promise<string> {
    const { stdout } = await exec('docker', ['run', '--rm', '--label', LABEL, '--network', 'none', '-u', '1000:1000', '--cap-drop', 'ALL', '-e', `K=${serverKey}`, '-e', `C=${serverCert}`, image, '/bin/sh', '-c', script], { maxBuffer: 16 * 1024 * 1024 });
    return stdout;
  }

  const SERVER = `/opt/airlock/node/node -e "require('https').createServer({key:process.env.K,cert:process.env.C},(q,r)=>r.end('tls-ok')).listen(8443,'127.0.0.1',()=>console.log('listening'))" > /tmp/server.log 2>&1 &
i=0; until grep -q listening /tmp/server.log 2>/dev/null || [ $i -gt 1200 ]; do sleep 0.05; i=$((i+1)); done
`;
  const NODE_CLIENT = `/opt/airlock/node/node -e "require('https').get('https://localhost:8443',r=>r.on('data',d=>console.log('node:'+d))).on('error',e=>console.log('node-failed:'+e.code))"`;

  it("Airlock's own image: its node (the official build, bundled roots only) trusts the CA with the environment commands get there, and not without it", async () => {
    // Commands never inherit the image's ENV (the helper gives them a clean one): `env -i` as the helper does.
    const given = Object.entries(AIRLOCK_IMAGE_ENV).map(([k, v]) => `${k}=${v}`).join(' ');
    const client = NODE_CLIENT.replace('/opt/airlock/node/node', 'node');
    const out = await inside(airlockWithCa, `${SERVER}env -i PATH=/usr/local/bin:/usr/bin:/bin HOME=/tmp ${given} ${client}\nenv -i PATH=/usr/local/bin:/usr/bin:/bin HOME=/tmp ${client}`);
    expect(out.split('\n').filter((l) => l.startsWith('node')).map((l) => l.replace(/:.*/, ''))).toEqual(['node', 'node-failed']);
    expect(out).toContain('node:tls-ok');
  }, 600_000);

  it('an image with a system store (Debian + ca-certificates): the store, curl, Python and Node trust the CA', async () => {
    const engine = await connectEngine(process.env);
    const derived = await deriveSandboxImage(engine.docker, { baseRef: await nodelessImage(), airlockRef: airlockWithCa, emit: () => undefined, what: 'the Node-less test image' });
    made.push(derived.ref);
    const out = await inside(
      derived.ref,
      `${SERVER}echo "env:$NODE_EXTRA_CA_CERTS|$SSL_CERT_FILE|$REQUESTS_CA_BUNDLE|$GIT_SSL_CAINFO|$CURL_CA_BUNDLE"
grep -c "BEGIN CERTIFICATE" /opt/airlock/ca/extra.pem
ls /usr/local/share/ca-certificates/airlock-host/
echo "curl:$(curl -sS --max-time 30 https://localhost:8443 2>&1)"
echo "curl-store:$(env -u CURL_CA_BUNDLE -u SSL_CERT_FILE curl -sS --max-time 30 https://localhost:8443 2>&1)"
python3 -c "import urllib.request;print('python:'+urllib.request.urlopen('https://localhost:8443', timeout=30).read().decode())" 2>&1 | tail -1
${NODE_CLIENT}`,
    );
    const bundle = '/opt/airlock/ca/bundle.pem';
    expect(out).toContain(`env:/opt/airlock/ca/extra.pem|${bundle}|${bundle}|${bundle}|${bundle}`);
    // The test CA, with whatever extras this machine itself adds (Airlock's image carries those too).
    expect(out).toMatch(/^[1-9]\d*$/m);
    expect(out).toContain('company-ca.crt');
    expect(out).toContain('curl:tls-ok');
    // The image's own system store holds it too (update-ca-certificates ran in the derive step).
    expect(out).toContain('curl-store:tls-ok');
    expect(out).toContain('python:tls-ok');
    expect(out).toContain('node:tls-ok');
  }, 900_000);

  it('an image with no CA store at all (debian:bookworm-slim): Node trusts the CA and the bundle holds the public roots and it', async () => {
    const engine = await connectEngine(process.env);
    const derived = await deriveSandboxImage(engine.docker, { baseRef: 'debian:bookworm-slim', airlockRef: airlockWithCa, emit: () => undefined, what: 'debian:bookworm-slim' });
    made.push(derived.ref);
    const out = await inside(derived.ref, `${SERVER}grep -c "BEGIN CERTIFICATE" "$SSL_CERT_FILE"\ngrep -c "Airlock test company CA" /opt/airlock/ca/extra.pem || true\n${NODE_CLIENT}`);
    const [count] = out.split('\n');
    // Airlock's public roots (Debian's, well over 100) plus the extra.
    expect(Number(count)).toBeGreaterThan(100);
    expect(out).toContain('node:tls-ok');
  }, 600_000);

  it("a devcontainer Dockerfile's own RUN steps trust the CA (curl and Python), and the variables stay out of the image", async () => {
    const engine = await connectEngine(process.env);
    const project = path.join(dir, 'project');
    await mkdir(path.join(project, '.devcontainer'), { recursive: true });
    await writeFile(
      path.join(project, '.devcontainer/serve.py'),
      [
        'import http.server, ssl',
        'class H(http.server.BaseHTTPRequestHandler):',
        '    def do_GET(self):',
        "        self.send_response(200); self.end_headers(); self.wfile.write(b'tls-ok')",
        '    def log_message(self, *a): pass',
        "s = http.server.HTTPServer(('127.0.0.1', 8443), H)",
        "c = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER); c.load_cert_chain('/tmp/c.pem', '/tmp/k.pem')",
        's.socket = c.wrap_socket(s.socket, server_side=True)',
        "open('/tmp/ready', 'w').close()",
        's.serve_forever()',
        '',
      ].join('\n'),
    );
    // The project's own steps reach a server whose certificate only the test CA signed (on the build container's loopback).
    await writeFile(
      path.join(project, '.devcontainer/Dockerfile'),
      `FROM ${await nodelessImage()}
ARG K
ARG C
COPY serve.py /tmp/serve.py
RUN printf '%s\\n' "$K" > /tmp/k.pem && printf '%s\\n' "$C" > /tmp/c.pem \\
 && { python3 /tmp/serve.py & } \\
 && i=0; while [ ! -f /tmp/ready ] && [ $i -lt 1200 ]; do sleep 0.1; i=$((i+1)); done; \\
 { echo "env:$NODE_EXTRA_CA_CERTS|$SSL_CERT_FILE|$REQUESTS_CA_BUNDLE|$GIT_SSL_CAINFO|$CURL_CA_BUNDLE"; \\
   echo "curl:$(curl -sS --max-time 30 https://localhost:8443 2>&1)"; \\
   python3 -c "import urllib.request;print('python:'+urllib.request.urlopen('https://localhost:8443', timeout=30).read().decode())" 2>&1 | tail -1; \\
   ls /usr/local/share/ca-certificates/airlock-host/; } > /build-result.txt; rm -f /tmp/k.pem
`,
    );
    await writeFile(path.join(project, '.devcontainer/devcontainer.json'), JSON.stringify({ build: { dockerfile: 'Dockerfile', args: { K: serverKey, C: serverCert } } }));
    const resolved = await resolveEnvironment(project, parseEnvironmentChoice('devcontainer'), { env: process.env });
    const prepared = await prepareEnvironmentImage(engine.docker, resolved, { projectDir: project, airlockRef: airlockWithCa, emit: () => undefined });
    if (!prepared) throw new Error('no devcontainer image');
    made.push(prepared.derived.ref, prepared.derived.baseRef);
    const { stdout } = await exec('docker', ['run', '--rm', '--label', LABEL, '--network', 'none', prepared.derived.baseRef, 'cat', '/build-result.txt']);
    const bundle = '/opt/airlock-build-ca/bundle.pem';
    expect(stdout).toContain(`env:${bundle}|${bundle}|${bundle}|${bundle}|${bundle}`);
    expect(stdout).toContain('curl:tls-ok');
    expect(stdout).toContain('python:tls-ok');
    expect(stdout).toContain('company-ca.crt');
    // Build arguments, not ENV: the project's image keeps its own configuration.
    const env = (await engine.docker.getImage(prepared.derived.baseRef).inspect()).Config?.Env ?? [];
    expect(env.filter((e) => /^(NODE_EXTRA_CA_CERTS|SSL_CERT_FILE|REQUESTS_CA_BUNDLE|GIT_SSL_CAINFO|CURL_CA_BUNDLE)=/.test(e))).toEqual([]);
  }, 900_000);

  it('names a TLS failure with what to do, and nothing else', () => {
    expect(tlsFailureHint('npm ERR! code UNABLE_TO_GET_ISSUER_CERT_LOCALLY\nnpm ERR! unable to get local issuer certificate')).toMatch(/TLS failure.*install your company's CA on this machine/);
    expect(tlsFailureHint('curl: (60) SSL certificate problem: self-signed certificate in certificate chain')).toMatch(/TLS failure/);
    expect(tlsFailureHint("pip._vendor.urllib3.exceptions.SSLError: [SSL: CERTIFICATE_VERIFY_FAILED] certificate verify failed")).toMatch(/TLS failure/);
    expect(tlsFailureHint('go: x509: certificate signed by unknown authority')).toMatch(/TLS failure/);
    expect(tlsFailureHint('npm ERR! 404 Not Found')).toBeUndefined();
  });
});
