import { z } from 'zod';

/**
 * Egress secrets (docs/architecture.md §2.8): values live in the OS keychain and are put on requests
 * by the gateway, only toward their hosts. Nothing here ever returns a value or a hint of one.
 */

/** How a secret travels, as one word: `bearer`, `basic:USER` (git over HTTPS), `header:NAME`. */
export const SecretFormText = z
  .string()
  .trim()
  .regex(/^(bearer|basic:[^:\s]{1,100}|header:[A-Za-z0-9-]{1,100})$/, 'a form is bearer, basic:USER or header:NAME');

/** One secret as the UI sees it: name, hosts, how it travels, and whether a value is stored. */
export const SecretView = z.object({
  name: z.string(),
  hosts: z.array(z.string()),
  pathPrefixes: z.array(z.string()).optional(),
  forms: z.array(z.string()),
  env: z.array(z.string()),
  git: z.boolean(),
  npm: z.boolean(),
  preset: z.string().optional(),
  /** Set when a host command prints the value when a run needs it (no value stored); the command line as written. */
  command: z.string().optional(),
  /** How long a command's value is held before it is fetched again. */
  ttlSeconds: z.number().optional(),
  /** A value is stored, or a command prints it. */
  hasValue: z.boolean(),
});
export type SecretView = z.infer<typeof SecretView>;

export const SECRET_NAME_HINT = 'a name is lower-case letters, digits, - and _, starting with a letter (up to 40)';

export const secretsContracts = {
  /** Every stored secret, by name, hosts and injection form; never a value. */
  'secrets:list': { input: z.strictObject({}).default({}), output: z.array(SecretView) },
  /**
   * Stores (or replaces) a secret: a preset (`github`, or `npm` with its registry host) or hosts and
   * forms of your own. The value goes to the keychain only and is never returned.
   */
  'secrets:set': {
    input: z
      .strictObject({
        name: z.string().trim().regex(/^[a-z][a-z0-9_-]{0,39}$/, SECRET_NAME_HINT),
        preset: z.enum(['github', 'npm']).optional(),
        hosts: z.array(z.string().trim().min(1).max(260)).max(20).default([]),
        forms: z.array(SecretFormText).max(4).default([]),
        value: z.string().min(4, 'the value is at least 4 characters').max(16_384),
      })
      .superRefine((v, ctx) => {
        if (v.preset === 'npm' && v.hosts.length !== 1) ctx.addIssue({ code: 'custom', path: ['hosts'], message: "the npm preset needs the registry's host" });
        if (!v.preset && (!v.hosts.length || !v.forms.length)) ctx.addIssue({ code: 'custom', path: ['hosts'], message: 'without a preset, give the hosts and how the secret travels' });
      }),
    output: SecretView,
  },
  /** Removes a secret's value from the keychain and its binding. */
  'secrets:remove': { input: z.strictObject({ name: z.string().min(1).max(40) }), output: z.object({ removed: z.boolean() }) },
} as const;
