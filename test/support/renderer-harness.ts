import type { Envelope } from '../../contracts/errors';
import { createApiRouter } from '../../core/api/router';
import { createApi, setApi } from '../../renderer/src/api';
import { connectStores } from '../../renderer/src/stores/connect-stores';
import { useRunsStore } from '../../renderer/src/stores/runs-store';
import type { Transport } from '../../renderer/src/transport/transport';
import { createFakeServices, type FakeServices } from './fake-services';

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

/**
 * The renderer's stores connected to fake services through the real router and a memory transport
 * (a JSON round trip like the wire), with the run list emptied; `prepare` may replace a handler of
 * the fakes first. Call `disconnect` after each test.
 */
export function connectFakeApp(opts: Parameters<typeof createFakeServices>[0], prepare?: (services: FakeServices) => void): { services: FakeServices; disconnect: () => void } {
  const services = createFakeServices(opts);
  // Before the router is built: it looks each handler up once.
  prepare?.(services);
  const api = createApi(createMemoryTransport(createApiRouter(services)));
  setApi(api);
  const disconnect = connectStores(api);
  useRunsStore.setState({ runs: {}, order: [], live: {}, loaded: false });
  return { services, disconnect };
}
