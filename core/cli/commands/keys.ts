import { AirlockError } from '../../../contracts/errors';
import { SetBaseUrlInput } from '../../../contracts/keys';
import { readCodexAuthFile, readCodexSignin } from '../../keys/codex-auth-file';
import { Secret } from '../../keys/secret';
import { storeCommand } from '../../keys/subscription-credentials';
import { CliUsageError, parseCliArgs } from '../args';
import { ExitCode, type CliCommand, type CliIo } from '../command';
import { withApp } from '../with-app';

const MAX_KEY_BYTES = 8192;

/**
 * Reads a key from stdin. On a terminal: hidden input (raw mode, no echo), ended by Enter. Piped:
 * the first line. Never from argv — that would land in shell history and `ps`.
 */
export async function readSecretFromStdin(io: CliIo, prompt: string): Promise<Secret> {
  const stdin = io.stdin as CliIo['stdin'] & { setRawMode?: (raw: boolean) => void };
  if (stdin.isTTY && typeof stdin.setRawMode === 'function') {
    io.stderr.write(prompt);
    const setRaw = stdin.setRawMode.bind(stdin);
    setRaw(true);
    try {
      const value = await new Promise<string>((resolve, reject) => {
        let buf = '';
        const onData = (chunk: Buffer | string) => {
          for (const ch of chunk.toString()) {
            if (ch === '\r' || ch === '\n') {
              stdin.off('data', onData);
              resolve(buf);
              return;
            }
            if (ch === '\u0003') {
              stdin.off('data', onData);
              reject(new AirlockError('CANCELLED', 'cancelled; no key stored'));
              return;
            }
            if (ch === '\u007f' || ch === '\b') buf = buf.slice(0, -1);
            else if (buf.length < MAX_KEY_BYTES) buf += ch;
          }
        };
        stdin.on('data', onData);
        stdin.resume();
      });
      return new Secret(value.trim());
    } finally {
      setRaw(false);
      stdin.pause();
      io.stderr.write('\n');
    }
  }
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of stdin) {
    const b = Buffer.isBuffer(chunk) ? chunk : Buffer.from(String(chunk));
    size += b.length;
    if (size > MAX_KEY_BYTES) throw new AirlockError('INVALID_INPUT', 'stdin holds more than a key; pipe just the key (e.g. `printenv MY_KEY | airlock keys set openai`)');
    chunks.push(b);
  }
  const first = Buffer.concat(chunks).toString('utf8').split(/\r?\n/).find((l) => l.trim() !== '') ?? '';
  if (!first.trim()) throw new AirlockError('INVALID_INPUT', 'no key on stdin; pipe it in (`printenv MY_KEY | airlock keys set <provider>`) or run in a terminal to paste it');
  return new Secret(first.trim());
}

/** All of stdin (an auth.json piped in), bounded. */
async function readAllStdin(io: CliIo): Promise<Secret> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of io.stdin) {
    const b = Buffer.isBuffer(chunk) ? chunk : Buffer.from(String(chunk));
    size += b.length;
    if (size > 65_536) throw new AirlockError('INVALID_INPUT', 'stdin holds more than an auth.json; pipe just the file (`airlock keys import-codex --from - < ~/.codex/auth.json`)');
    chunks.push(b);
  }
  return new Secret(Buffer.concat(chunks).toString('utf8'));
}

const usage = `airlock keys set <provider> [--base-url URL] [--session]   (the key is read from stdin)
       airlock keys set-url <provider> <url>   (changes the base URL; the stored key stays as it is)
       airlock keys set-subscription claude [--session]   (the token from \`claude setup-token\`, read from stdin)
       airlock keys import-codex [--from PATH|-] [--session]   (the ChatGPT sign-in of \`codex login\`: its auth.json, else its OS keyring entry)
       airlock keys list [--json]
       airlock keys rm <provider>
       airlock keys test <provider> [--json]   (API key, Claude subscription token or ChatGPT sign-in)`;

/** `airlock keys …`: store, list, remove and test provider keys in the OS keychain. */
export const keysCommand: CliCommand = {
  name: 'keys',
  summary: 'Manage provider API keys in the OS keychain (never shown, never in a file).',
  usage,
  async run(args, io) {
    // A key pasted in the wrong place must not be echoed back in the error.
    const { values, positionals } = parseCliArgs(args, { 'base-url': { type: 'string' }, session: { type: 'boolean' }, json: { type: 'boolean' }, from: { type: 'string' } }, { sensitive: true });
    const [sub, provider, ...extra] = positionals;
    // The core's vault and catalog (the same keychain service), so the CLI and a run see the same entries.
    return withApp(io, async ({ vault, catalog }) => {
      try {
        switch (sub) {
          case 'set': {
            if (!provider) break;
            if (extra.length > 0) {
              throw new AirlockError('INVALID_INPUT', 'the key is read from stdin, never from the command line (it would end up in shell history and `ps`); run `airlock keys set ' + provider + '` and paste it');
            }
            const secret = await readSecretFromStdin(io, `Paste the ${provider} API key (input hidden), then Enter: `);
            const info = await vault.set(provider, secret, { storage: values.session ? 'session' : 'keychain', ...(values['base-url'] ? { baseUrl: values['base-url'] } : {}) });
            io.stdout.write(`stored the ${provider} key (…${info.last4 ?? ''}) in ${info.storage === 'session' ? 'memory for this session only' : 'the OS keychain'}; base URL ${info.baseUrl}\n`);
            return ExitCode.ok;
          }
          case 'set-url': {
            const [url, ...more] = extra;
            if (!provider || !url || more.length) break;
            const parsed = SetBaseUrlInput.safeParse({ provider, baseUrl: url });
            if (!parsed.success) throw new AirlockError('INVALID_INPUT', parsed.error.issues[0]?.message ?? 'not a valid base URL');
            const info = await vault.setBaseUrl(provider, parsed.data.baseUrl);
            io.stdout.write(`${provider} now calls ${info.baseUrl}; ${info.hasKey ? `its key (…${info.last4 ?? ''}) is unchanged` : 'no key is stored for it'}\n`);
            return ExitCode.ok;
          }
          case 'set-subscription': {
            if (provider !== 'claude' || extra.length > 0) {
              throw new AirlockError('INVALID_INPUT', 'usage: `airlock keys set-subscription claude`, then paste the token from `claude setup-token` (a ChatGPT sign-in is imported with `airlock keys import-codex`)');
            }
            const secret = await readSecretFromStdin(io, 'Paste the token from `claude setup-token` (input hidden), then Enter: ');
            const info = await vault.setClaudeSubscription(secret, { storage: values.session ? 'session' : 'keychain' });
            io.stdout.write(`stored the Claude subscription token in ${info.storage === 'session' ? 'memory for this session only' : 'the OS keychain'}; it serves only Claude Code runs (--agent claude-code --provider claude-subscription)\n`);
            return ExitCode.ok;
          }
          case 'import-codex': {
            if (provider) break;
            // No --from: where Codex keeps it (its auth.json, else its OS keyring entry).
            const from = values.from;
            const found = from === undefined ? await readCodexSignin(io.env) : { text: from === '-' ? await readAllStdin(io) : await readCodexAuthFile(from), from: from === '-' ? undefined : from };
            const info = await vault.importChatgptSignin(found.text, { storage: values.session ? 'session' : 'keychain' });
            const where = info.storage === 'session' ? 'memory for this session only' : 'the OS keychain';
            io.stdout.write(`imported the ChatGPT sign-in${found.from ? ` from ${found.from}` : ''} into ${where}${info.expiresAt ? ` (access token valid until ${info.expiresAt}; Airlock refreshes it)` : ''}; it serves only Codex runs (--agent codex --provider chatgpt-signin)\n`);
            return ExitCode.ok;
          }
          case 'list': {
            if (provider) break;
            const [list, status] = await Promise.all([vault.list(), vault.status()]);
            if (values.json) {
              io.stdout.write(`${JSON.stringify({ keychain: status, keys: list })}\n`);
              return ExitCode.ok;
            }
            if (!status.available) io.stderr.write(`warning: ${status.message}\n`);
            const shown = (k: (typeof list)[number]) => (!k.hasKey ? '—' : k.credential === 'chatgpt-signin' ? 'signed in' : k.credential ? `subscription …${k.last4 ?? '????'}` : `…${k.last4 ?? '????'}`);
            const rows = list.map((k) => [k.provider, shown(k), k.storage ?? '', k.baseUrl ?? '', k.addedAt ?? '']);
            const head = ['PROVIDER', 'KEY', 'STORED IN', 'BASE URL', 'ADDED'];
            const widths = head.map((h, i) => Math.max(h.length, ...rows.map((r) => (r[i] ?? '').length)));
            for (const r of [head, ...rows]) io.stdout.write(`${r.map((c, i) => (c ?? '').padEnd(widths[i] ?? 0)).join('  ').trimEnd()}\n`);
            return ExitCode.ok;
          }
          case 'rm': {
            if (!provider || extra.length) break;
            const removed = await vault.remove(provider);
            io.stdout.write(removed ? `removed the ${provider} key\n` : `no ${provider} key was stored\n`);
            return ExitCode.ok;
          }
          case 'test': {
            if (!provider || extra.length) break;
            const result = await vault.test(provider);
            if (values.json) io.stdout.write(`${JSON.stringify(result)}\n`);
            else {
              io.stdout.write(`${provider}: ${result.status} — ${result.message}${result.latencyMs !== undefined ? ` (${result.latencyMs} ms)` : ''}\n`);
              // The shared message names no command (the UI shows it too); the terminal's fix is this one.
              if (result.status === 'bad-key') {
                const { credential } = await catalog.get(provider);
                io.stdout.write(credential ? `  → replace it: ${storeCommand(provider, credential)}\n` : `  → store a valid key: airlock keys set ${provider}\n`);
              }
            }
            return result.status === 'ok' ? ExitCode.ok : ExitCode.failure;
          }
        }
        // Not quoted: a key pasted as an argument must not be echoed.
        throw new CliUsageError(sub ? 'unknown subcommand or wrong arguments' : 'name a subcommand');
      } catch (err) {
        if (err instanceof AirlockError && err.kind === 'KEYCHAIN_UNAVAILABLE') {
          io.stderr.write(`airlock keys: ${err.message} [${err.kind}]\n`);
          return ExitCode.unavailable;
        }
        throw err;
      }
    });
  },
};
