import { generateKeyPair, randomBytes, type KeyObject } from 'node:crypto';
import { promisify } from 'node:util';
import forge from 'node-forge';

/**
 * The certificate authority of ONE run (docs/architecture.md §2.8). It lives in this process's
 * memory only: its private key is never written anywhere and never crosses the channel; the sandbox
 * gets `certificatePem` alone, so it can trust leaves this CA signs but cannot sign any itself.
 *
 * Node can verify certificates but not make them, so certificates are built with `node-forge`
 * (maintained, dependency-free, no global polyfill — `@peculiar/x509` needs a process-wide Reflect
 * polyfill). Keys come from Node's native generator (fast); forge only assembles and signs the
 * X.509 structure, once per intercepted host name (cached for the run).
 */
export class RunCa {
  private readonly leaves = new Map<string, Promise<string>>();
  private serial = 1;

  private constructor(
    private readonly caKey: forge.pki.rsa.PrivateKey,
    private readonly caCert: forge.pki.Certificate,
    /** One key for every leaf of the run: its only use is to terminate TLS in this process. */
    readonly leafKeyPem: string,
    private readonly leafPublic: forge.pki.rsa.PublicKey,
    readonly certificatePem: string,
  ) {}

  /** Makes a fresh CA (valid from an hour ago for two days: a run never outlives it). */
  static async create(runId: string): Promise<RunCa> {
    const [ca, leaf] = await Promise.all([rsaKeyPair(), rsaKeyPair()]);
    const caKey = forge.pki.privateKeyFromPem(ca.privateKey.export({ type: 'pkcs1', format: 'pem' }).toString()) as forge.pki.rsa.PrivateKey;
    const caPublic = forge.pki.publicKeyFromPem(ca.publicKey.export({ type: 'spki', format: 'pem' }).toString()) as forge.pki.rsa.PublicKey;
    const cert = forge.pki.createCertificate();
    cert.publicKey = caPublic;
    cert.serialNumber = serialHex();
    setValidity(cert);
    // The run id in the name tells a user who inspects the sandbox's trust store what this CA is.
    const name = [
      { name: 'commonName', value: `Airlock run CA ${runId.slice(0, 40)}` },
      { name: 'organizationName', value: 'Airlock (per-run, key held on the host)' },
    ];
    cert.setSubject(name);
    cert.setIssuer(name);
    cert.setExtensions([
      { name: 'basicConstraints', cA: true, pathLenConstraint: 0, critical: true },
      { name: 'keyUsage', keyCertSign: true, cRLSign: true, critical: true },
      { name: 'subjectKeyIdentifier' },
    ]);
    cert.sign(caKey, forge.md.sha256.create());
    const leafPublic = forge.pki.publicKeyFromPem(leaf.publicKey.export({ type: 'spki', format: 'pem' }).toString()) as forge.pki.rsa.PublicKey;
    const leafKeyPem = leaf.privateKey.export({ type: 'pkcs8', format: 'pem' }).toString();
    return new RunCa(caKey, cert, leafKeyPem, leafPublic, forge.pki.certificateToPem(cert));
  }

  /** The leaf certificate (PEM) for `host`, signed by this CA; made once per host. */
  leafFor(host: string): Promise<string> {
    let leaf = this.leaves.get(host);
    if (!leaf) {
      leaf = Promise.resolve().then(() => this.sign(host));
      this.leaves.set(host, leaf);
    }
    return leaf;
  }

  private sign(host: string): string {
    const cert = forge.pki.createCertificate();
    cert.publicKey = this.leafPublic;
    cert.serialNumber = `${serialHex().slice(0, 28)}${(this.serial++).toString(16).padStart(4, '0')}`;
    setValidity(cert);
    cert.setSubject([{ name: 'commonName', value: host }]);
    cert.setIssuer(this.caCert.subject.attributes);
    cert.setExtensions([
      { name: 'basicConstraints', cA: false, critical: true },
      { name: 'keyUsage', digitalSignature: true, keyEncipherment: true, critical: true },
      { name: 'extKeyUsage', serverAuth: true },
      { name: 'subjectAltName', altNames: [{ type: 2, value: host }] },
      { name: 'authorityKeyIdentifier', keyIdentifier: this.caCert.generateSubjectKeyIdentifier().getBytes() },
    ]);
    cert.sign(this.caKey, forge.md.sha256.create());
    return forge.pki.certificateToPem(cert);
  }
}

const generate = promisify(generateKeyPair);

function rsaKeyPair(): Promise<{ publicKey: KeyObject; privateKey: KeyObject }> {
  return generate('rsa', { modulusLength: 2048 });
}

/** A positive 128-bit serial (the top bit cleared so DER never reads it as negative). */
function serialHex(): string {
  const b = randomBytes(16);
  b[0] = (b[0] as number) & 0x7f;
  return b.toString('hex');
}

function setValidity(cert: forge.pki.Certificate): void {
  cert.validity.notBefore = new Date(Date.now() - 3_600_000);
  cert.validity.notAfter = new Date(Date.now() + 2 * 86_400_000);
}
