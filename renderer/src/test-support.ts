import type { Envelope } from '../../contracts/errors';
import type { Transport } from './transport/transport';

/** The slice of the API router a memory transport needs (tests pass the real router over fakes). */
export interface RouterLike {
  invoke(channel: string, input: unknown): Promise<Envelope<unknown>>;
  subscribe(event: string, listener: (payload: unknown) => void): { dispose(): void };
}

/** A transport that calls a router in the same process, through a JSON round trip like the wire. */
export function createMemoryTransport(router: RouterLike): Transport {
  const clone = <T>(v: T): T => (v === undefined ? v : (JSON.parse(JSON.stringify(v)) as T));
  return {
    kind: 'memory',
    invoke: async (channel, input) => clone(await router.invoke(channel, clone(input))),
    on: (event, listener) => {
      const sub = router.subscribe(event, (p) => listener(clone(p)));
      return () => sub.dispose();
    },
  };
}
