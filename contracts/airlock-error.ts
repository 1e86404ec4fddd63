import type { ErrorInfo, ErrorKind } from './errors';

// Kept apart from errors.ts (and its zod schemas) so code that only throws, like the CLI's argument
// parser, does not load zod: `airlock --help` stays fast (docs/architecture.md §8: CLI start ≤ 3× `node -e 0`).

/** A typed error; `kind` travels across processes, `message` is shown to the user. */
export class AirlockError extends Error {
  constructor(
    readonly kind: ErrorKind,
    message: string,
    options?: { cause?: unknown; field?: string; suggestion?: string },
  ) {
    super(message, options?.cause !== undefined ? { cause: options.cause } : undefined);
    this.name = 'AirlockError';
    this.field = options?.field;
    this.suggestion = options?.suggestion;
  }

  /** The input field the error is about, when there is one. */
  readonly field: string | undefined;
  /** A value the user can take for `field` instead, when there is one. */
  readonly suggestion: string | undefined;

  toInfo(): ErrorInfo {
    return { kind: this.kind, message: this.message, ...(this.field ? { field: this.field } : {}), ...(this.suggestion ? { suggestion: this.suggestion } : {}) };
  }
}
