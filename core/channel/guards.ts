/**
 * A small guard library for the channel's wire protocol (docs/architecture.md §4): each message is
 * defined once as a guard, its TypeScript type is inferred from it (`Infer`), and both ends check
 * what they receive with it. It runs inside the sandbox bundle too, so it has no dependencies and
 * costs nothing at start (zod would add to the helper's start on the sandbox-ready path).
 *
 * A guard returns a fresh value holding only what it declares (unknown keys are dropped, nothing is
 * taken from a prototype), so what a side acts on is derived from the check, never the raw input.
 * A failure throws GuardError naming the field (`spawn.argv[0]`) and what was expected; it never
 * echoes the value (a request can carry a run token), only its kind.
 */

/** What a value did not match: `field` is its path in the message (`info.durationMs`), `expected` what would have. */
export class GuardError extends Error {
  constructor(
    readonly field: string,
    readonly expected: string,
    got: unknown,
  ) {
    super(`${field || 'the message'}: expected ${expected}, got ${kindOf(got)}`);
    this.name = 'GuardError';
  }
}

function kindOf(value: unknown): string {
  if (value === null) return 'null';
  if (Array.isArray(value)) return `an array of ${value.length}`;
  if (typeof value === 'string') return `a string of ${value.length} characters`;
  if (typeof value === 'number') return Number.isFinite(value) ? (Number.isInteger(value) ? 'an integer out of range' : 'a fraction') : 'a non-finite number';
  return typeof value === 'object' ? 'an object' : typeof value;
}

export interface Guard<T> {
  /** What the guard accepts, in words (used in errors). */
  readonly expected: string;
  /** The checked (and copied) value; throws GuardError naming `field` otherwise. */
  check(value: unknown, field?: string): T;
}

/** A guard whose key may be absent (or undefined) in an object. */
export interface OptionalGuard<T> extends Guard<T | undefined> {
  readonly optional: true;
}

export type Infer<G> = G extends Guard<infer T> ? T : never;

type Shape = Record<string, Guard<unknown>>;
type OptionalKeys<S> = { [K in keyof S]: S[K] extends OptionalGuard<unknown> ? K : never }[keyof S];
type Simplify<T> = { [K in keyof T]: T[K] } & {};
/** The object type a shape (an object of guards) describes: optional guards become optional keys. */
export type InferShape<S> = Simplify<
  { [K in Exclude<keyof S, OptionalKeys<S>>]: Infer<S[K]> } & { [K in OptionalKeys<S>]?: Exclude<Infer<S[K]>, undefined> }
>;

function guard<T>(expected: string, test: (value: unknown, field: string) => T): Guard<T> {
  return { expected, check: (value, field = '') => test(value, field) };
}

/** A string of at most `max` characters (default 4096); `clip` shortens a longer one instead of refusing it. */
export function str(opts: { max?: number; min?: number; clip?: boolean } = {}): Guard<string> {
  const max = opts.max ?? 4096;
  const min = opts.min ?? 0;
  const expected = min > 0 ? `a string of ${min}..${max} characters` : `a string of at most ${max} characters`;
  return guard(expected, (v, field) => {
    if (typeof v !== 'string' || v.length < min || (v.length > max && !opts.clip)) throw new GuardError(field, expected, v);
    return v.length > max ? v.slice(0, max) : v;
  });
}

/** A safe integer within `min`..`max`. */
export function int(opts: { min?: number; max?: number } = {}): Guard<number> {
  const min = opts.min ?? Number.MIN_SAFE_INTEGER;
  const max = opts.max ?? Number.MAX_SAFE_INTEGER;
  const expected =
    opts.min !== undefined && opts.max !== undefined ? `an integer ${min}..${max}` : opts.min !== undefined ? `an integer >= ${min}` : opts.max !== undefined ? `an integer <= ${max}` : 'an integer';
  return guard(expected, (v, field) => {
    if (typeof v !== 'number' || !Number.isSafeInteger(v) || v < min || v > max) throw new GuardError(field, expected, v);
    return v;
  });
}

/** A finite number, at least `min` when given. */
export function num(opts: { min?: number } = {}): Guard<number> {
  const min = opts.min ?? Number.NEGATIVE_INFINITY;
  const expected = opts.min === undefined ? 'a finite number' : `a finite number >= ${opts.min}`;
  return guard(expected, (v, field) => {
    if (typeof v !== 'number' || !Number.isFinite(v) || v < min) throw new GuardError(field, expected, v);
    return v;
  });
}

export const bool: Guard<boolean> = guard('true or false', (v, field) => {
  if (typeof v !== 'boolean') throw new GuardError(field, 'true or false', v);
  return v;
});

/** Anything (a value passed through untouched; its consumer checks it). */
export const unknownValue: Guard<unknown> = guard('any value', (v) => v);

/** Exactly `value`. */
export function literal<const L extends string | number | boolean>(value: L): Guard<L> {
  const expected = JSON.stringify(value);
  return guard(expected, (v, field) => {
    if (v !== value) throw new GuardError(field, expected, v);
    return value;
  });
}

/** One of a few strings. */
export function oneOf<const L extends string>(values: readonly L[]): Guard<L> {
  const allowed = new Set<unknown>(values);
  const expected = values.map((x) => `'${x}'`).join(' or ');
  return guard(expected, (v, field) => {
    if (!allowed.has(v)) throw new GuardError(field, expected, v);
    return v as L;
  });
}

/** An array of `item`s, `min`..`max` long (default 0..1e6). */
export function array<T>(item: Guard<T>, opts: { min?: number; max?: number } = {}): Guard<T[]> {
  const min = opts.min ?? 0;
  const max = opts.max ?? 1_000_000;
  const expected = `${min > 0 ? 'a non-empty array' : 'an array'} of at most ${max} items, each ${item.expected}`;
  return guard(expected, (v, field) => {
    if (!Array.isArray(v) || v.length < min || v.length > max) throw new GuardError(field, expected, v);
    const out: T[] = new Array<T>(v.length);
    for (let i = 0; i < v.length; i++) out[i] = item.check(v[i], `${field}[${i}]`);
    return out;
  });
}

const isPlainObject = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);

/** An object used as a map from names to `value`s, at most `maxKeys` of them (copied onto a null-prototype object). */
export function dict<T>(value: Guard<T>, opts: { maxKeys?: number } = {}): Guard<Record<string, T>> {
  const maxKeys = opts.maxKeys ?? 10_000;
  const expected = `an object of at most ${maxKeys} entries, each ${value.expected}`;
  return guard(expected, (v, field) => {
    if (!isPlainObject(v)) throw new GuardError(field, expected, v);
    const keys = Object.keys(v);
    if (keys.length > maxKeys) throw new GuardError(field, expected, v);
    const out = Object.create(null) as Record<string, T>;
    for (const k of keys) out[k] = value.check(v[k], `${field}.${k}`);
    return out;
  });
}

/** `inner` or null. */
export function nullable<T>(inner: Guard<T>): Guard<T | null> {
  const expected = `${inner.expected}, or null`;
  return guard(expected, (v, field) => (v === null ? null : inner.check(v, field)));
}

/** In an object shape: the key may be absent or undefined; otherwise it must match `inner`. */
export function optional<T>(inner: Guard<T>): OptionalGuard<T> {
  return { expected: inner.expected, optional: true, check: (v, field = '') => (v === undefined ? undefined : inner.check(v, field)) };
}

/** `inner`, and also `test`; `expected` says both (it replaces inner's words for the value itself, not for a nested field). */
export function refine<T>(inner: Guard<T>, expected: string, test: (value: T) => boolean): Guard<T> {
  return guard(expected, (v, field) => {
    let value: T;
    try {
      value = inner.check(v, field);
    } catch (err) {
      if (err instanceof GuardError && err.field === field) throw new GuardError(field, expected, v);
      throw err;
    }
    if (!test(value)) throw new GuardError(field, expected, v);
    return value;
  });
}

/** An object with these keys (others are dropped from the result); optional keys that are absent stay absent. */
export function object<S extends Shape>(shape: S): Guard<InferShape<S>> {
  const entries = Object.entries(shape);
  return guard('an object', (v, field) => {
    if (!isPlainObject(v)) throw new GuardError(field, 'an object', v);
    const out: Record<string, unknown> = {};
    for (const [key, g] of entries) {
      const value = g.check(Object.prototype.hasOwnProperty.call(v, key) ? v[key] : undefined, field ? `${field}.${key}` : key);
      if (value !== undefined) out[key] = value;
    }
    return out as InferShape<S>;
  });
}

/**
 * One of several object guards, chosen by the string in `key` (a message's `t`, a request's `op`);
 * an unknown tag fails naming the key. The variants' own shapes should declare the tag as a literal.
 */
export function tagged<K extends string, V extends Record<string, Guard<object>>>(key: K, variants: V): Guard<Infer<V[keyof V]>> {
  const names = Object.keys(variants);
  const expected = names.map((x) => `'${x}'`).join(' or ');
  return guard(`an object whose ${key} is ${expected}`, (v, field) => {
    if (!isPlainObject(v)) throw new GuardError(field, 'an object', v);
    const tag = v[key];
    const variant = typeof tag === 'string' && Object.prototype.hasOwnProperty.call(variants, tag) ? variants[tag] : undefined;
    if (!variant) throw new GuardError(field ? `${field}.${key}` : key, expected, tag);
    return variant.check(v, field) as Infer<V[keyof V]>;
  });
}
