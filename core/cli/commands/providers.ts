import { AirlockError } from '../../../contracts/errors';
import { CliUsageError, parseCliArgs } from '../args';
import { ExitCode, type CliCommand } from '../command';
import { withApp } from '../with-app';
import { debugLog } from '../../common/debug-log';

const usage = `airlock providers add <id> --base-url URL [--no-key] [--label TEXT] [--model ID]… [--kind openai-compatible|anthropic]
       airlock providers list [--json]
       airlock providers rm <id>`;

/** `airlock providers …`: OpenAI-compatible servers (Ollama, LM Studio, llama.cpp, vLLM, OpenRouter). */
export const providersCommand: CliCommand = {
  name: 'providers',
  summary: 'Add, list and remove model providers (OpenAI-compatible servers with a custom base URL).',
  usage,
  async run(args, io) {
    // A key pasted in the wrong place must not be echoed back in the error.
    const { values, positionals } = parseCliArgs(
      args,
      {
        'base-url': { type: 'string' },
        'no-key': { type: 'boolean' },
        label: { type: 'string' },
        model: { type: 'string', multiple: true },
        kind: { type: 'string' },
        json: { type: 'boolean' },
      },
      { sensitive: true },
    );
    const [sub, id, ...extra] = positionals;
    // The core's catalog and vault (the same keychain service), so this lists and removes what a run uses.
    return withApp(io, async ({ catalog, vault }) => {
      switch (sub) {
        case 'add': {
          if (!id || extra.length) break;
          if (!values['base-url']) throw new AirlockError('INVALID_INPUT', `give the server's base URL, e.g. \`airlock providers add ${id} --base-url http://127.0.0.1:11434/v1\``);
          const kind = values.kind ?? 'openai-compatible';
          if (kind !== 'openai-compatible' && kind !== 'anthropic') throw new AirlockError('INVALID_INPUT', '--kind is openai-compatible (default) or anthropic');
          const p = await catalog.add({
            id,
            baseUrl: values['base-url'],
            kind,
            requiresKey: !values['no-key'],
            ...(values.label ? { label: values.label } : {}),
            ...(values.model ? { models: values.model } : {}),
          });
          io.stdout.write(`added ${p.id} (${p.kind}) at ${p.baseUrl}${p.requiresKey ? `; store its key with \`airlock keys set ${p.id}\`` : ' (no key needed)'}\n`);
          return ExitCode.ok;
        }
        case 'list': {
          if (id) break;
          const keys = new Map((await vault.list()).map((k) => [k.provider, k]));
          const list = (await catalog.list()).map((p) => ({ ...p, hasKey: keys.get(p.id)?.hasKey ?? false }));
          if (values.json) {
            io.stdout.write(`${JSON.stringify(list)}\n`);
            return ExitCode.ok;
          }
          const rows = list.map((p) => [p.id, p.kind, p.baseUrl, p.requiresKey ? (p.hasKey ? 'key stored' : 'no key') : 'no key needed', p.builtin ? 'built-in' : '']);
          const head = ['ID', 'KIND', 'BASE URL', 'KEY', ''];
          const widths = head.map((h, i) => Math.max(h.length, ...rows.map((r) => (r[i] ?? '').length)));
          for (const r of [head, ...rows]) io.stdout.write(`${r.map((c, i) => (c ?? '').padEnd(widths[i] ?? 0)).join('  ').trimEnd()}\n`);
          return ExitCode.ok;
        }
        case 'rm': {
          if (!id || extra.length) break;
          const p = await catalog.get(id);
          if (p.builtin) {
            await catalog.remove(id);
            io.stdout.write(`${id} is built in and stays; its base URL is reset to the default\n`);
            return ExitCode.ok;
          }
          await vault.remove(id).catch(debugLog.swallow('keys.remove.keychain'));
          await catalog.remove(id);
          io.stdout.write(`removed ${id} and its key\n`);
          return ExitCode.ok;
        }
      }
      // Not quoted: a key pasted as an argument must not be echoed.
      throw new CliUsageError(sub ? 'unknown subcommand or wrong arguments' : 'name a subcommand');
    });
  },
};
