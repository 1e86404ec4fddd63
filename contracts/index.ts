import type { z } from 'zod';
import { attemptsContracts, attemptsEvents } from './attempts';
import { auditContracts } from './audit';
import { diffsContracts, diffsEvents } from './diffs';
import { environmentsContracts } from './environments';
import { keysContracts, keysEvents } from './keys';
import { mcpContracts, mcpEvents } from './mcp';
import { mcpServersContracts } from './mcp-servers';
import { projectsContracts } from './projects';
import { runsContracts, runsEvents } from './runs';
import { sandboxesContracts, sandboxesEvents } from './sandboxes';
import { secretsContracts } from './secrets';
import { settingsContracts, settingsEvents } from './settings';
import { terminalsContracts, terminalsEvents } from './terminals';

export * from './agent-events';
export * from './attempts';
export * from './audit';
export * from './cli-command';
export * from './checkpoints';
export * from './diffs';
export * from './environments';
export * from './errors';
export * from './external-links';
export * from './error-help';
export * from './ids';
export * from './keys';
export * from './mcp';
export * from './mcp-servers';
export * from './projects';
export * from './runs';
export * from './run-again';
export * from './run-defaults';
export * from './sandboxes';
export * from './secrets';
export * from './settings';
export * from './terminals';

/** One request/response channel: one input object in, one value out (wrapped in an Envelope). */
export interface Contract {
  input: z.ZodType;
  output: z.ZodType;
}

/**
 * Every request/response channel (`domain:verb`). Main's IPC router, the preload allowlist, the
 * WebSocket host and the renderer client are all derived from this one table.
 */
export const contracts = {
  ...sandboxesContracts,
  ...keysContracts,
  ...runsContracts,
  ...diffsContracts,
  ...terminalsContracts,
  ...settingsContracts,
  ...auditContracts,
  ...projectsContracts,
  ...mcpContracts,
  ...mcpServersContracts,
  ...attemptsContracts,
  ...environmentsContracts,
  ...secretsContracts,
} as const satisfies Record<string, Contract>;

/** Every push event (`domain:onDidX`) and its payload schema. */
export const events = {
  ...sandboxesEvents,
  ...keysEvents,
  ...runsEvents,
  ...diffsEvents,
  ...terminalsEvents,
  ...settingsEvents,
  ...mcpEvents,
  ...attemptsEvents,
} as const satisfies Record<string, z.ZodType>;

export type Channel = keyof typeof contracts;
export type EventName = keyof typeof events;

/** What a caller passes (defaults not yet applied). */
export type ChannelInput<C extends Channel> = z.input<(typeof contracts)[C]['input']>;
/** What a handler receives after validation (defaults applied). */
export type ChannelArgs<C extends Channel> = z.output<(typeof contracts)[C]['input']>;
export type ChannelOutput<C extends Channel> = z.output<(typeof contracts)[C]['output']>;
export type EventPayload<E extends EventName> = z.output<(typeof events)[E]>;

export const channelNames = Object.keys(contracts) as Channel[];
export const eventNames = Object.keys(events) as EventName[];

export function isChannel(name: unknown): name is Channel {
  return typeof name === 'string' && Object.prototype.hasOwnProperty.call(contracts, name);
}

export function isEventName(name: unknown): name is EventName {
  return typeof name === 'string' && Object.prototype.hasOwnProperty.call(events, name);
}
