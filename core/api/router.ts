import { channelNames, contracts, eventNames, events, isChannel, isEventName } from '../../contracts';
import type { Channel, EventName, EventPayload } from '../../contracts';
import { AirlockError, toErrorInfo, type Envelope } from '../../contracts/errors';
import type { Disposable, Event } from '../common/disposable';
import type { AirlockServices } from './services';

/** The transport-neutral API: what Electron's IPC router and the WebSocket host both serve. */
export interface ApiRouter {
  /** Validates `rawInput` against the channel's contract, calls the service, never throws. */
  invoke(channel: string, rawInput: unknown): Promise<Envelope<unknown>>;
  /**
   * Subscribes to a push event; payloads are validated against the event's schema (unknown fields
   * stripped). `skip` drops payloads the subscriber never wants before they are validated (cheaper).
   */
  subscribe(event: string, listener: (payload: unknown) => void, skip?: (payload: unknown) => boolean): Disposable;
}

type Handler = (args: unknown) => Promise<unknown>;

function splitName(name: string): [string, string] {
  const i = name.indexOf(':');
  return [name.slice(0, i), name.slice(i + 1)];
}

/** Looks up `services.<domain>.<verb>`; a missing handler is a wiring bug, reported at creation. */
function resolveHandler(services: AirlockServices, channel: Channel): Handler {
  const [domain, verb] = splitName(channel);
  const service = (services as unknown as Record<string, Record<string, unknown> | undefined>)[domain];
  const fn = service?.[verb];
  if (typeof fn !== 'function') throw new Error(`no handler for contract '${channel}' (services.${domain}.${verb})`);
  return (args) => (fn as Handler).call(service, args);
}

function resolveEvent(services: AirlockServices, name: EventName): Event<unknown> {
  const [domain, member] = splitName(name);
  const service = (services as unknown as Record<string, Record<string, unknown> | undefined>)[domain];
  const ev = service?.[member];
  if (typeof ev !== 'function') throw new Error(`no event source for '${name}' (services.${domain}.${member})`);
  return ev as Event<unknown>;
}

/**
 * Builds the router over the services. Every contract must have a handler and every event a
 * source (checked here, so a missing one fails at startup rather than at the first click).
 *
 * Outputs are parsed too: object schemas strip unknown fields, so a field a service adds by
 * mistake (a key, an internal path) never reaches a renderer.
 */
export function createApiRouter(services: AirlockServices): ApiRouter {
  const handlers = new Map<Channel, Handler>(channelNames.map((c) => [c, resolveHandler(services, c)]));
  const sources = new Map<EventName, Event<unknown>>(eventNames.map((e) => [e, resolveEvent(services, e)]));

  return {
    async invoke(channel, rawInput) {
      if (!isChannel(channel)) {
        return { ok: false, error: { kind: 'INVALID_INPUT', message: `unknown channel '${String(channel).slice(0, 80)}'` } };
      }
      const contract = contracts[channel];
      const parsed = contract.input.safeParse(rawInput ?? undefined);
      if (!parsed.success) return { ok: false, error: toErrorInfo(parsed.error) };
      try {
        const value = await (handlers.get(channel) as Handler)(parsed.data);
        const out = contract.output.safeParse(value);
        if (!out.success) {
          // A service broke its contract: report it without echoing the value (it may hold anything).
          return { ok: false, error: { kind: 'INTERNAL', message: `'${channel}' returned an invalid result: ${toErrorInfo(out.error).message}` } };
        }
        return { ok: true, value: out.data };
      } catch (err) {
        return { ok: false, error: toErrorInfo(err) };
      }
    },

    subscribe(event, listener, skip) {
      if (!isEventName(event)) throw new AirlockError('INVALID_INPUT', `unknown event '${String(event).slice(0, 80)}'`);
      const schema = events[event];
      const source = sources.get(event) as Event<EventPayload<typeof event>>;
      return source((payload) => {
        if (skip?.(payload)) return;
        const parsed = schema.safeParse(payload);
        if (parsed.success) listener(parsed.data);
      });
    },
  };
}
