import { parseArgs, type ParseArgsConfig } from 'node:util';
import { AirlockError } from '../../contracts/airlock-error';

/**
 * Bad usage of a command: `main` prints the message and the command's usage and exits 2 (README,
 * "Command line"). Every command reports its argument errors this way, so none can fall through to
 * an internal error.
 */
export class CliUsageError extends AirlockError {
  constructor(message: string) {
    super('INVALID_INPUT', message);
    this.name = 'CliUsageError';
  }
}

type Options = NonNullable<ParseArgsConfig['options']>;

/**
 * The one argument parser of the CLI: `node:util` parseArgs in strict mode, positionals allowed,
 * its errors turned into a `CliUsageError`. `sensitive` leaves the offending argument out of the
 * message (it could be a key pasted in the wrong place).
 */
export function parseCliArgs<const O extends Options>(args: string[], options: O, { sensitive = false }: { sensitive?: boolean } = {}) {
  try {
    return parseArgs({ args, options, allowPositionals: true, strict: true });
  } catch (err) {
    const quoted = /'(-[^']*)'/.exec((err as Error).message)?.[1];
    throw new CliUsageError(sensitive || !quoted ? 'unknown or malformed option' : `unknown option or missing value: ${quoted}`);
  }
}

/** A numeric option's value, checked: `--timeout 30`, `--port 0`… */
export function numberOption(value: string | undefined, name: string, { integer = false, min = -Infinity, max = Infinity }: { integer?: boolean; min?: number; max?: number } = {}): number | undefined {
  if (value === undefined) return undefined;
  const n = Number(value);
  if (value.trim() === '' || !Number.isFinite(n) || (integer && !Number.isInteger(n)) || n < min || n > max) {
    const range = min > -Infinity && max < Infinity ? ` from ${min} to ${max}` : min > -Infinity ? ` of at least ${min}` : '';
    throw new CliUsageError(`--${name} takes ${integer ? 'a whole number' : 'a number'}${range}, not '${value.slice(0, 40)}'`);
  }
  return n;
}

/** The positionals a command takes: exactly `names.length` of them, named in the error. */
export function positionalsExactly<const N extends readonly string[]>(positionals: string[], ...names: N): { [K in keyof N]: string } {
  if (positionals.length < names.length) throw new CliUsageError(`missing ${names.slice(positionals.length).join(' ')}`);
  if (positionals.length > names.length) throw new CliUsageError(`unexpected argument '${String(positionals[names.length]).slice(0, 80)}'`);
  return positionals as unknown as { [K in keyof N]: string };
}
