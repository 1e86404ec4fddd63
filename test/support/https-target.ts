import https from 'node:https';
import type { AddressInfo } from 'node:net';
import { RunCa } from '../../core/network/gateway/run-ca';

/** An HTTPS server on 127.0.0.1 that answers every request with `served METHOD URL` and remembers it. */
export interface HttpsTarget {
  port: number;
  /** `METHOD URL` of every request that reached the server, in order. */
  served: string[];
  /** The certificate of the CA that signed the server's leaf: what the gateway must trust upstream. */
  caPem: string;
  close(): Promise<void>;
}

/** Starts an HTTPS target for `host` with a leaf from a CA made for it (the gateway tests' stand-in for a real site). */
export async function startHttpsTarget(host: string, caName: string): Promise<HttpsTarget> {
  const ca = await RunCa.create(caName);
  const served: string[] = [];
  const server = https.createServer({ key: ca.leafKeyPem, cert: await ca.leafFor(host) }, (req, res) => {
    served.push(`${req.method} ${req.url}`);
    req.resume();
    req.on('end', () => res.end(`served ${req.method} ${req.url}`));
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return {
    port: (server.address() as AddressInfo).port,
    served,
    caPem: ca.certificatePem,
    close: () => new Promise<void>((r) => server.close(() => r())),
  };
}
