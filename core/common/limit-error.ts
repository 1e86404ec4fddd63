import { AirlockError } from '../../contracts/errors';
import type { ErrorKind } from '../../contracts/errors';

/**
 * A limit the host set was reached (a result's byte cap, a read's cap): a typed error, so the code
 * that set the limit tells it from other failures by its class and `limit`, never by its words.
 * Travels across processes as the AirlockError it is (kind and message).
 */
export class LimitError extends AirlockError {
  constructor(
    kind: ErrorKind,
    /** Which limit: `result-bytes` (collect's cap on the changed files), `file-bytes` (an MCP client's read of one file). */
    readonly limit: 'result-bytes' | 'file-bytes',
    /** The cap that was reached. */
    readonly cap: number,
    message: string,
  ) {
    super(kind, message);
    this.name = 'LimitError';
  }
}
