/**
 * Side doors of the model APIs: request features that make the *provider* fetch, search, run code or
 * call MCP servers on the sandbox's behalf. With the network off, they would still carry project
 * data to third parties (issue 12, attack 4), so the proxy strips them from what it forwards — the
 * request stays meaningful (Codex sends a hosted `web_search` tool with every request and must keep
 * working) — or refuses, in the provider's own error format, when stripping cannot keep it meaningful
 * (the request forces a stripped tool). Only `anthropic-beta` values known to be client-side features
 * pass. A provider setting can allow named side doors; what was stripped, refused or allowed is
 * returned for the run's audit log.
 *
 * Names: Anthropic server tools by type without the date (`web_search`, `web_fetch`,
 * `code_execution`, …), `mcp_servers`, `container`; OpenAI hosted tools by type (`web_search`,
 * `web_search_preview`, `mcp`, `file_search`, `code_interpreter`, `image_generation`,
 * `computer_use_preview`, …), `web_search_options`; beta headers as `anthropic-beta:<value>`;
 * URL-sourced images, documents and files anywhere in the conversation as `url_content`
 * (url-content.ts: each is replaced by a text note, so the conversation stays meaningful).
 */
import { MAX_CONTENT_DEPTH, URL_CONTENT, urlContentPolicy } from './url-content';
import type { WireFormat } from './wire-format';

/** `anthropic-beta` values for client-side features (agents need them; none makes the provider reach out). */
export const KNOWN_ANTHROPIC_BETAS: ReadonlySet<string> = new Set([
  'claude-code-20250219',
  'interleaved-thinking-2025-05-14',
  'fine-grained-tool-streaming-2025-05-14',
  'context-1m-2025-08-07',
  'context-management-2025-06-27',
  'prompt-caching-2024-07-31',
  'extended-cache-ttl-2025-04-11',
  'token-efficient-tools-2025-02-19',
  'output-128k-2025-02-19',
  'token-counting-2024-11-01',
  'computer-use-2024-10-22',
  'computer-use-2025-01-24',
  'computer-use-2025-11-24',
  'pdfs-2024-09-25',
  'max-tokens-3-5-sonnet-2024-07-15',
  'tool-examples-2025-10-29',
  'effort-2025-11-24',
  'structured-outputs-2025-11-13',
  'model-context-window-exceeded-2025-08-26',
]);

/** Anthropic tool types the client runs itself (`bash_20250124`, `text_editor_…`, …): not side doors. */
const ANTHROPIC_CLIENT_TOOL = /^(custom|bash|text_editor|str_replace_editor|str_replace_based_edit_tool|computer|memory)(_\d{8})?$/;
/** OpenAI tool types the client runs itself. */
const OPENAI_CLIENT_TOOLS = new Set(['function', 'custom', 'local_shell', 'shell', 'apply_patch']);
/** Responses `include` values that only exist for a hosted tool. */
const INCLUDE_OF_TOOL: Record<string, string> = {
  web_search_call: 'web_search',
  file_search_call: 'file_search',
  code_interpreter_call: 'code_interpreter',
  computer_call_output: 'computer_use_preview',
};

/** Top-level fields the policy reads: a body with any of them is forwarded re-serialised. */
const POLICY_KEYS = ['tools', 'tool_choice', 'mcp_servers', 'container', 'web_search_options', 'include'];

export interface SideDoorResult {
  /** The body to forward, re-serialised (it changed, or it carries tools); undefined: forward as it came. */
  body?: Record<string, unknown>;
  /** The `anthropic-beta` value to forward (undefined: drop the header) when it changed. */
  beta?: { value: string | undefined };
  stripped: string[];
  /** Side doors that passed because the provider's setting allows them by name. */
  allowed: string[];
  /** Set when the request cannot go out meaningfully without a stripped feature. */
  refusal?: { status: 400; message: string; name: string };
}

const isObj = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);

/** The side-door name of a tool entry, or undefined for a client-side tool. */
export function sideDoorOfTool(format: WireFormat, tool: unknown): string | undefined {
  if (!isObj(tool)) return undefined;
  const type = typeof tool.type === 'string' ? tool.type : undefined;
  if (format === 'anthropic') {
    if (type === undefined || ANTHROPIC_CLIENT_TOOL.test(type)) return undefined;
    return type.replace(/_\d{8}$/, '');
  }
  if (type === undefined || OPENAI_CLIENT_TOOLS.has(type)) return undefined;
  // A Responses `namespace` groups tools the client runs (how Codex offers an MCP server's tools, §20):
  // a side door only if something inside it is one.
  if (type === 'namespace' && Array.isArray(tool.tools)) return tool.tools.map((t) => sideDoorOfTool(format, t)).find((d) => d !== undefined);
  return type;
}

/**
 * The `anthropic-beta` header with the betas Airlock does not know left out (each `note`d; an allowed
 * one stays). A new value when one was left out or the header came as several; undefined: as it came.
 */
function betaHeaderPolicy(header: string | string[] | undefined, note: (name: string) => boolean): { value: string | undefined } | undefined {
  if (header === undefined) return undefined;
  const values = (Array.isArray(header) ? header.join(',') : header).split(',').map((v) => v.trim()).filter(Boolean);
  const kept = values.filter((v) => KNOWN_ANTHROPIC_BETAS.has(v) || !note(`anthropic-beta:${v}`));
  return kept.length !== values.length || Array.isArray(header) ? { value: kept.length ? kept.join(',') : undefined } : undefined;
}

/** A Responses `include` list without the outputs of provider-side tools that are not allowed. */
function includesAllowed(include: unknown[], allowSet: ReadonlySet<string>): unknown[] {
  return include.filter((v) => {
    const tool = typeof v === 'string' ? INCLUDE_OF_TOOL[v.split('.')[0] as string] : undefined;
    return !(tool && !allowSet.has(tool));
  });
}

/**
 * Applies the side-door policy to a parsed request body and its `anthropic-beta` header. Never
 * mutates `parsed`; returns a new body only when something was stripped.
 */
export function applySideDoorPolicy(input: {
  format: WireFormat;
  parsed: Record<string, unknown> | undefined;
  /** The text `parsed` came from: when absent, the conversation is always walked. */
  raw?: Buffer;
  betaHeader: string | string[] | undefined;
  /** Side-door names the provider's setting allows. */
  allow: readonly string[];
}): SideDoorResult {
  const { format, allow } = input;
  const allowSet = new Set(allow);
  const stripped: string[] = [];
  const allowed: string[] = [];
  const note = (name: string): boolean => {
    if (allowSet.has(name)) {
      if (!allowed.includes(name)) allowed.push(name);
      return false;
    }
    if (!stripped.includes(name)) stripped.push(name);
    return true;
  };
  const result: SideDoorResult = { stripped, allowed };

  const beta = betaHeaderPolicy(input.betaHeader, note);
  if (beta) result.beta = beta;

  const parsed = input.parsed;
  if (!parsed) return result;
  let body: Record<string, unknown> | undefined;
  const edit = (): Record<string, unknown> => (body ??= { ...parsed });
  for (const key of format === 'anthropic' ? ['mcp_servers', 'container'] : ['web_search_options']) {
    if (parsed[key] !== undefined && note(key)) delete edit()[key];
  }

  // URL-sourced content anywhere in the conversation (url-content.ts).
  const carriesPolicyKeys = POLICY_KEYS.some((k) => parsed[k] !== undefined);
  const urls = urlContentPolicy(parsed, input.raw, allowSet.has(URL_CONTENT), carriesPolicyKeys);
  if (urls === 'too-deep') {
    result.refusal = {
      status: 400,
      name: URL_CONTENT,
      message: `Airlock's model proxy could not check this request's content for URL-sourced items: it nests deeper than ${MAX_CONTENT_DEPTH} levels. Send flatter content.`,
    };
    return result;
  }
  if (urls.found) note(URL_CONTENT);
  if (urls.reserialise) Object.assign(edit(), urls.fields);

  const removed = new Set<string>();
  if (Array.isArray(parsed.tools)) {
    const tools = parsed.tools.filter((t) => {
      const door = sideDoorOfTool(format, t);
      if (door === undefined || !note(door)) return true;
      removed.add(door);
      if (isObj(t) && typeof t.name === 'string') removed.add(`name:${t.name}`);
      return false;
    });
    if (tools.length !== parsed.tools.length) {
      const b = edit();
      if (tools.length) b.tools = tools;
      else delete b.tools;
    }
  }

  if (format === 'openai' && Array.isArray(parsed.include)) {
    const include = includesAllowed(parsed.include, allowSet);
    if (include.length !== parsed.include.length) edit().include = include;
  }

  // A tool choice that forces a stripped tool cannot be met: refuse rather than change the request's meaning.
  const choice = parsed.tool_choice;
  if (removed.size && choice !== undefined) {
    const forced = isObj(choice)
      ? format === 'anthropic'
        ? choice.type === 'tool' && removed.has(`name:${String(choice.name)}`)
        : typeof choice.type === 'string' && removed.has(choice.type)
      : false;
    const b = body ?? parsed;
    const noTools = !Array.isArray(b.tools);
    const mustUse = noTools && (choice === 'required' || choice === 'any' || (isObj(choice) && choice.type !== 'auto' && choice.type !== 'none'));
    if (forced || mustUse) {
      const name = [...removed].find((r) => !r.startsWith('name:')) as string;
      result.refusal = {
        status: 400,
        name,
        message: `Airlock's model proxy does not forward the provider-side tool '${name}' (it would let the provider fetch or send data outside the sandbox), and this request requires it (tool_choice). Remove it from the request, or allow it for this provider in Airlock's settings.`,
      };
    } else if (noTools) {
      const e = edit();
      delete e.tool_choice;
      delete e.parallel_tool_calls;
    }
  }
  if (body && !Array.isArray(body.tools) && format === 'openai') delete body.parallel_tool_calls;
  if (body) result.body = body;
  // A body that carries tools goes out as parsed, never as it came: the raw text could hold a
  // duplicate key (`"type":"web_search","type":"function"`) that another parser reads the other way.
  else if (carriesPolicyKeys) result.body = parsed;
  return result;
}
