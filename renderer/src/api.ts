import type { Channel, ChannelInput, ChannelOutput, EventName, EventPayload } from '../../contracts';
import type { ErrorInfo, ErrorKind } from '../../contracts/errors';
import type { Transport } from './transport/transport';

/** A failed contract call, as the UI shows it. */
export class ApiError extends Error {
  readonly kind: ErrorKind;
  readonly info: ErrorInfo;
  constructor(info: ErrorInfo) {
    super(info.message);
    this.kind = info.kind;
    this.info = info;
    this.name = 'ApiError';
  }
}

/** A failure as the contract's ErrorInfo (for ErrorBanner's title and actions); other errors are INTERNAL. */
export function errorInfo(err: unknown): ErrorInfo {
  return err instanceof ApiError ? err.info : { kind: 'INTERNAL', message: errorMessage(err) };
}

/** The typed client over the chosen transport. */
export interface Api {
  readonly transportKind: Transport['kind'];
  call<C extends Channel>(channel: C, ...input: undefined extends ChannelInput<C> ? [ChannelInput<C>?] : [ChannelInput<C>]): Promise<ChannelOutput<C>>;
  on<E extends EventName>(event: E, listener: (payload: EventPayload<E>) => void): () => void;
  onConnectionChange(listener: (connected: boolean, why?: string) => void): () => void;
}

export function createApi(transport: Transport): Api {
  return {
    transportKind: transport.kind,
    async call(channel, ...rest) {
      const envelope = await transport.invoke(channel, rest[0]);
      if (!envelope.ok) throw new ApiError(envelope.error);
      return envelope.value as never;
    },
    on(event, listener) {
      return transport.on(event, listener as (p: unknown) => void);
    },
    onConnectionChange(listener) {
      return transport.onConnectionChange?.(listener) ?? (() => {});
    },
  };
}

let current: Api | undefined;

/** The app's API client, set once at boot (tests set their own). */
export function setApi(api: Api): void {
  current = api;
}

export function api(): Api {
  if (!current) throw new Error('api not initialised');
  return current;
}

export function errorMessage(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}
