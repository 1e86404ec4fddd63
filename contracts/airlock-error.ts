import type { ErrorInfo, ErrorKind } from './errors';

// Kept apart from errors.ts (and its zod schemas) so code that only throws, like the CLI's argument
// parser, does not load zod: `airlock --help` stays fast (DESIGN budget: CLI start ≤ 3× `node -e 0`).

/** A typed error; `kind` travels across processes, `message` is shown to the user. */
export class AirlockError extends Error {
  constructor(
    readonly kind: ErrorKind,
    message: string,
    options?: { cause?: unknown; field?: string },
  ) {
    super(message, options?.cause !== undefined ? { cause: options.cause } : undefined);
    this.name = 'AirlockError';
    this.field = options?.field;
  }

  /** The input field the error is about, when there is one. */
  readonly field: string | undefined;

  toInfo(): ErrorInfo {
    return { kind: this.kind, message: this.message, ...(this.field ? { field: this.field } : {}) };
  }
}
