import type { PolicyChannel } from '../network-policy';

/**
 * Where the run CA's certificate goes inside the sandbox. The root filesystem is read-only, so the
 * files go to the sandbox's own tmpfs and every tool is pointed at them through its variable. The
 * sandbox may rewrite them (it owns /tmp); that only breaks its own TLS — the CA's key is never here.
 */
export const TRUST_DIR = '/tmp/.airlock-egress';
const SYSTEM_BUNDLES = ['/etc/ssl/certs/ca-certificates.crt', '/etc/pki/tls/certs/ca-bundle.crt', '/etc/ssl/cert.pem'];

/**
 * Writes `run-ca.pem` (the CA alone: Node adds it to its bundled roots) and `ca-bundle.pem` (the
 * sandbox's system roots plus the CA: OpenSSL-based tools replace their store with the file they are
 * given), and returns the variables that point each tool at them.
 */
export async function installRunCa(channel: PolicyChannel & { writeFile(path: string, data: Buffer | string, opts?: { mode?: number }): Promise<void> }, caPem: string): Promise<Record<string, string>> {
  let system = '';
  for (const file of SYSTEM_BUNDLES) {
    try {
      system = (await channel.readFile(file, { maxBytes: 4 * 1024 * 1024 })).toString('utf8');
      break;
    } catch {
      // try the next distribution's path
    }
  }
  const runCa = `${TRUST_DIR}/run-ca.pem`;
  const bundle = `${TRUST_DIR}/ca-bundle.pem`;
  await channel.writeFile(runCa, caPem, { mode: 0o644 });
  await channel.writeFile(bundle, `${system.trimEnd()}\n${caPem}`, { mode: 0o644 });
  return {
    NODE_EXTRA_CA_CERTS: runCa,
    SSL_CERT_FILE: bundle,
    REQUESTS_CA_BUNDLE: bundle,
    CURL_CA_BUNDLE: bundle,
    GIT_SSL_CAINFO: bundle,
    PIP_CERT: bundle,
    CARGO_HTTP_CAINFO: bundle,
  };
}
