import { createHash, randomBytes, timingSafeEqual } from 'node:crypto';
import type { RunBudget } from './budget';

export type { RunBudget } from './budget';

export interface TokenGrant {
  runId: string;
  providers: string[];
  models?: string[];
  budget?: RunBudget;
  /** The run's agent; a subscription credential serves only its vendor's client. */
  agent?: string;
}

function digest(token: string): Buffer {
  return createHash('sha256').update(token).digest();
}

/**
 * Run tokens: 256 bits from the CSPRNG, stored only as SHA-256 digests. Lookup is by digest (an
 * attacker cannot steer a hash prefix), then confirmed with a constant-time compare.
 */
export class RunTokenRegistry {
  private readonly byDigest = new Map<string, { digest: Buffer; grant: TokenGrant }>();

  issue(grant: TokenGrant): { token: string; revoke(): void } {
    const token = `airlock-run-${randomBytes(32).toString('base64url')}`;
    const d = digest(token);
    const id = d.toString('hex');
    this.byDigest.set(id, { digest: d, grant });
    return { token, revoke: () => this.byDigest.delete(id) };
  }

  /** The grant for a presented token, or undefined (missing, unknown or revoked). */
  check(presented: string | undefined): TokenGrant | undefined {
    if (!presented || presented.length > 512) return undefined;
    const d = digest(presented);
    const entry = this.byDigest.get(d.toString('hex'));
    if (!entry || !timingSafeEqual(entry.digest, d)) return undefined;
    return entry.grant;
  }

  revokeRun(runId: string): number {
    let n = 0;
    for (const [id, entry] of this.byDigest) {
      if (entry.grant.runId === runId) {
        this.byDigest.delete(id);
        n += 1;
      }
    }
    return n;
  }

  clear(): void {
    this.byDigest.clear();
  }
}

/** The token as SDKs send it: `x-api-key` (Anthropic) or `Authorization: Bearer` (OpenAI). */
export function presentedToken(headers: Record<string, string | string[] | undefined>): string | undefined {
  const x = headers['x-api-key'];
  if (typeof x === 'string' && x) return x.trim();
  const auth = headers.authorization;
  if (typeof auth === 'string' && /^bearer /i.test(auth)) return auth.slice(7).trim();
  return undefined;
}
