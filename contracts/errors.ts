import { z } from 'zod';
import { AirlockError } from './airlock-error';

/**
 * Every error that crosses a process boundary has a kind from this list and a message that says
 * what happened and what to do. Messages never contain secrets.
 */
export const ErrorKind = z.enum([
  'INVALID_INPUT',
  'NOT_FOUND',
  'CONFLICT',
  'UNAUTHORIZED',
  'FORBIDDEN',
  'DOCKER_NOT_INSTALLED',
  'DOCKER_NOT_RUNNING',
  'DOCKER_PERMISSION_DENIED',
  /** A remote engine (ssh, TLS, tcp) cannot be reached or the link dropped. */
  'DOCKER_UNREACHABLE',
  'IMAGE_BUILD_FAILED',
  'IMAGE_INCOMPATIBLE',
  'DISK_FULL',
  'SANDBOX_FAILED',
  'CHANNEL_CLOSED',
  'COMMAND_TIMEOUT',
  'KEYCHAIN_UNAVAILABLE',
  'KEY_MISSING',
  'PROVIDER_UNKNOWN',
  'UPSTREAM_ERROR',
  'BUDGET_EXCEEDED',
  'VM_UNAVAILABLE',
  'GVISOR_UNAVAILABLE',
  /** The engine would run a sandbox without its memory/CPU/process limits (rootless on cgroup v1). */
  'ENGINE_LIMITS_UNSUPPORTED',
  'CANCELLED',
  'INTERNAL',
]);
export type ErrorKind = z.infer<typeof ErrorKind>;

export const ErrorInfo = z.object({
  kind: ErrorKind,
  message: z.string(),
  /** The input field the error is about (e.g. `projectDir`), so a form can mark it and offer the fix. */
  field: z.string().max(100).optional(),
  /**
   * A value the user can take for `field` instead (a free branch name when the chosen one exists):
   * a screen offers it from here, never by reading it out of the message.
   */
  suggestion: z.string().max(500).optional(),
});
export type ErrorInfo = z.infer<typeof ErrorInfo>;

/** The result envelope of every contract call. */
export type Envelope<T> = { ok: true; value: T } | { ok: false; error: ErrorInfo };

export function envelopeSchema<T extends z.ZodType>(value: T) {
  return z.discriminatedUnion('ok', [
    z.object({ ok: z.literal(true), value }),
    z.object({ ok: z.literal(false), error: ErrorInfo }),
  ]);
}

export { AirlockError } from './airlock-error';

/** Turns anything thrown into an ErrorInfo without leaking stack traces or unknown fields. */
export function toErrorInfo(err: unknown): ErrorInfo {
  if (err instanceof AirlockError) return err.toInfo();
  if (err instanceof z.ZodError) {
    return { kind: 'INVALID_INPUT', message: err.issues.map((i) => `${i.path.join('.') || 'input'}: ${i.message}`).join('; ') };
  }
  const message = err instanceof Error ? err.message : String(err);
  return { kind: 'INTERNAL', message };
}
