import { inspect } from 'node:util';

const REDACTED = '[REDACTED]';

/**
 * Holds a secret (an API key) so that every accidental way of printing it — string conversion,
 * JSON, `util.inspect`/console.log, template literals — yields `[REDACTED]`. Only `reveal()` gives
 * the value, and it is called only where the key is injected into an upstream request.
 */
export class Secret<T = string> {
  readonly #value: T;

  constructor(value: T) {
    this.#value = value;
  }

  /** The secret itself. Call only at the point of use; never log or return the result. */
  reveal(): T {
    return this.#value;
  }

  /** Last four characters, for display (`…abcd`); empty when the secret is too short to hint at safely. */
  last4(): string {
    const v = String(this.#value);
    return v.length >= 12 ? v.slice(-4) : '';
  }

  toString(): string {
    return REDACTED;
  }

  toJSON(): string {
    return REDACTED;
  }

  [Symbol.toPrimitive](): string {
    return REDACTED;
  }

  [inspect.custom](): string {
    return REDACTED;
  }
}
