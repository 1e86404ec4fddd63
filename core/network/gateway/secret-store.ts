import path from 'node:path';
import { z } from 'zod';
import { AirlockError } from '../../../contracts/errors';
import { StoredFile } from '../../common/stored-file';
import { parseStoredJson } from '../../common/stored-json';
import { keyBackendOf, type KeyBackend, type KeychainAccess } from '../../keys/keychain-backend';
import { Secret } from '../../keys/secret';
import { normalizeHostPattern } from '../allowlist';
import type { BrokeredSecret } from './credential-broker';
import { HostCommandSecret, type HostCommandSecretOptions } from './host-command-secret';
import { debugLog } from '../../common/debug-log';

/**
 * Secrets the egress gateway injects on the way out (docs/architecture.md §2.8). The value lives in
 * the OS keychain — the same backend as provider keys, under its own account namespace
 * (`egress-secret:<name>`) so no secret can shadow a provider key; the binding (hosts, path prefixes,
 * how it is sent) is plain metadata in `<home>/egress-secrets.json`, which never holds a value. A
 * secret may instead name a host command that prints the value when a run needs it (never stored).
 */

/** How a secret travels: what the gateway looks for (the placeholder) and swaps. */
export const InjectFormSchema = z.discriminatedUnion('type', [
  /** `Authorization: Bearer <v>` (and GitHub's `token <v>`). */
  z.object({ type: z.literal('bearer') }).strict(),
  /** `Authorization: Basic base64(user:<v>)`: git over HTTPS, through the credential helper. */
  z.object({ type: z.literal('basic'), username: z.string().min(1).max(100).regex(/^[^:\s]+$/) }).strict(),
  /** A named header whose whole value is the secret (`PRIVATE-TOKEN`, `X-Api-Key`). */
  z.object({ type: z.literal('header'), name: z.string().min(1).max(100).regex(/^[A-Za-z0-9-]+$/) }).strict(),
]);
export type InjectForm = z.infer<typeof InjectFormSchema>;

const NAME = /^[a-z][a-z0-9_-]{0,39}$/;

export const SecretBindingSchema = z
  .object({
    name: z.string().regex(NAME),
    hosts: z.array(z.string().min(1).max(260)).min(1).max(20),
    /** Only requests under one of these paths get the value; undefined = every path of the hosts. */
    pathPrefixes: z.array(z.string().startsWith('/').max(300)).max(20).optional(),
    forms: z.array(InjectFormSchema).min(1).max(4),
    /** Sandbox variables that hold the placeholder (`GH_TOKEN`). */
    env: z.array(z.string().regex(/^[A-Z_][A-Z0-9_]{0,63}$/)).max(8).default([]),
    /** Whether git's credential helper answers with the placeholder for these hosts. */
    git: z.boolean().default(false),
    /** Whether npm's user config names the placeholder as the auth token for these hosts. */
    npm: z.boolean().default(false),
    preset: z.string().max(40).optional(),
    /**
     * Set: the value is not stored; a host command prints it when a run first needs it (argv, no
     * shell) and again after a 401 or its life (`ttlSeconds`); host-command-secret.ts.
     */
    command: z
      .object({
        argv: z.array(z.string().min(1).max(4096)).min(1).max(64),
        ttlSeconds: z.number().int().min(1).max(30 * 86_400).optional(),
      })
      .strict()
      .optional(),
  })
  .strict();
export type SecretBinding = z.infer<typeof SecretBindingSchema>;
export type SecretBindingInput = z.input<typeof SecretBindingSchema>;

export const SECRET_PRESETS = ['github', 'npm'] as const;
export type SecretPreset = (typeof SECRET_PRESETS)[number];

/**
 * Bindings for the known services. GitHub: the API takes a bearer token, git over HTTPS takes it as
 * the Basic password (any user name); `gh` reads `GH_TOKEN`. npm-style registries take a bearer
 * token; `host` is the registry's host (`registry.npmjs.org`, a company registry, …).
 */
export function presetBinding(preset: SecretPreset, name: string, host?: string): SecretBindingInput {
  if (preset === 'github') {
    return {
      name,
      preset,
      hosts: host ? [host] : ['github.com', 'api.github.com', '*.githubusercontent.com'],
      forms: [{ type: 'bearer' }, { type: 'basic', username: 'x-access-token' }],
      env: ['GH_TOKEN', 'GITHUB_TOKEN'],
      git: true,
    };
  }
  if (!host) throw new AirlockError('INVALID_INPUT', 'the npm preset needs the registry host (--host registry.example.com)');
  return { name, preset, hosts: [host], forms: [{ type: 'bearer' }], env: ['NPM_TOKEN'], npm: true };
}

const StoreFile = z.object({ version: z.literal(1), secrets: z.array(SecretBindingSchema) }).strict();

/** What list shows: the binding and whether a value is stored; never the value or a hint of it. */
export interface SecretSummary extends SecretBinding {
  hasValue: boolean;
}

export class SecretStore {
  readonly file: string;
  private readonly backend: KeyBackend;
  private readonly stored: StoredFile<z.infer<typeof StoreFile>>;

  constructor(opts: { home: string } & KeychainAccess) {
    this.file = path.join(opts.home, 'egress-secrets.json');
    this.stored = new StoredFile<z.infer<typeof StoreFile>>(this.file, { parse: (file, text) => parseStoredJson(StoreFile, file, text, 'fix or remove it (it holds no values; those stay in the keychain).'), empty: () => ({ version: 1, secrets: [] }) });
    this.backend = keyBackendOf(opts);
  }

  /** Stores (or replaces) a secret and its binding. The value goes to the keychain only. */
  async set(input: SecretBindingInput, value: string): Promise<SecretBinding> {
    const binding = normalizeBinding(input);
    if (binding.command) throw new AirlockError('INVALID_INPUT', `the secret "${binding.name}" names a command; store it with setCommand (no value is stored for it)`);
    const v = value.replace(/\r?\n$/, '');
    if (v.length < 4 || v.length > 16_384 || /[\r\n\0]/.test(v)) {
      throw new AirlockError('INVALID_INPUT', 'the secret value must be one line of 4 to 16384 characters (pipe it on stdin)');
    }
    return this.change(async (all) => {
      await this.backend.probe();
      await this.backend.set(account(binding.name), v);
      return { list: [...all.filter((s) => s.name !== binding.name), binding], result: binding };
    });
  }

  /**
   * Stores a secret whose value a host command prints when a run needs it (`binding.command`). No
   * value is stored; one left in the keychain from an earlier `set` under this name is deleted.
   */
  async setCommand(input: SecretBindingInput): Promise<SecretBinding> {
    const binding = normalizeBinding(input);
    if (!binding.command) throw new AirlockError('INVALID_INPUT', `the secret "${binding.name}" names no command`);
    return this.change(async (all) => {
      const list = [...all.filter((s) => s.name !== binding.name), binding];
      await this.backend.delete(account(binding.name)).catch(debugLog.swallow('secrets.remove.keychain'));
      return { list, result: binding };
    });
  }

  async list(): Promise<SecretSummary[]> {
    const all = await this.read();
    // A command secret always has a way to its value (whether the command works shows on first use).
    return Promise.all(all.map(async (s) => ({ ...s, hasValue: s.command !== undefined || (await this.backend.get(account(s.name)).catch(() => undefined)) !== undefined }))); // an unreadable value shows as not set
  }

  /** Removes the value and the binding; false when there was neither. */
  async remove(name: string): Promise<boolean> {
    return this.change(async (all) => {
      const had = all.some((s) => s.name === name);
      const deleted = await this.backend.delete(account(name));
      return { list: had ? all.filter((s) => s.name !== name) : all, result: had || deleted };
    });
  }

  /**
   * A run's chosen secrets for the credential broker: stored values read from the keychain now,
   * command secrets as a `HostCommandSecret` that runs its command only when the gateway needs the
   * value. A name that is not stored is an error.
   */
  async forRun(names: string[], opts: Omit<HostCommandSecretOptions, 'ttlMs'>): Promise<BrokeredSecret[]> {
    const all = await this.read();
    const out: BrokeredSecret[] = [];
    for (const name of [...new Set(names)]) {
      const binding = all.find((s) => s.name === name);
      if (binding?.command) {
        const ttl = binding.command.ttlSeconds;
        out.push({ binding, value: new HostCommandSecret(name, binding.command.argv, { ...opts, ...(ttl ? { ttlMs: ttl * 1000 } : {}) }) });
      } else out.push(...(await this.resolve([name])));
    }
    return out;
  }

  /** The bindings and stored values of secrets (not command ones); a name that is not stored is an error. */
  async resolve(names: string[]): Promise<Array<{ binding: SecretBinding; value: Secret<string> }>> {
    const all = await this.read();
    const out: Array<{ binding: SecretBinding; value: Secret<string> }> = [];
    for (const name of [...new Set(names)]) {
      const binding = all.find((s) => s.name === name);
      if (binding?.command) throw new AirlockError('CONFLICT', `the secret "${name}" is fetched by a host command; no value is stored for it`);
      const value = binding ? await this.backend.get(account(name)) : undefined;
      if (!binding || value === undefined) {
        throw new AirlockError('NOT_FOUND', `no secret named "${name}"; add it with \`airlock secrets set ${name} --preset github\` (the value on stdin)`);
      }
      out.push({ binding, value: new Secret(value) });
    }
    return out;
  }

  private async read(): Promise<SecretBinding[]> {
    return (await this.stored.read()).secrets;
  }

  /** One update of the file (serialised with every other, in this process and others): `op` returns the list to store and its result. */
  private async change<R>(op: (all: SecretBinding[]) => Promise<{ list: SecretBinding[]; result: R }>): Promise<R> {
    let result: { value: R } | undefined;
    await this.stored.update(async (file) => {
      const out = await op(file.secrets);
      result = { value: out.result };
      return out.list === file.secrets ? file : { version: 1, secrets: out.list };
    });
    return (result as { value: R }).value;
  }

}

function account(name: string): string {
  return `egress-secret:${name}`;
}

/** Validates a binding; host patterns are normalized like allowlist entries (no IPs, no bare TLDs). */
export function normalizeBinding(input: SecretBindingInput): SecretBinding {
  const parsed = SecretBindingSchema.safeParse(input);
  if (!parsed.success) {
    const issue = parsed.error.issues[0];
    const where = issue?.path.join('.') ?? '';
    const hint = where === 'name' ? 'names are lower-case letters, digits, - and _ (up to 40), starting with a letter' : (issue?.message ?? 'invalid');
    throw new AirlockError('INVALID_INPUT', `invalid secret binding${where ? ` (${where})` : ''}: ${hint}`);
  }
  return { ...parsed.data, hosts: [...new Set(parsed.data.hosts.map(normalizeHostPattern))] };
}

/** `bearer`, `basic:USER`, `header:NAME` → the form; undefined when it is none of them. */
export function formFromText(text: string): InjectForm | undefined {
  const t = text.trim();
  if (t === 'bearer') return { type: 'bearer' };
  if (t.startsWith('basic:')) return { type: 'basic', username: t.slice('basic:'.length) };
  if (t.startsWith('header:')) return { type: 'header', name: t.slice('header:'.length) };
  return undefined;
}

/** The form as one word (what the CLI and the Secrets screen show). */
export function formText(f: InjectForm): string {
  return f.type === 'bearer' ? 'bearer' : f.type === 'basic' ? `basic:${f.username}` : `header:${f.name}`;
}
