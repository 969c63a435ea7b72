import { silentLogger } from '../../lib/logger';
import type { DomainSnapshot, FleetSnapshot } from '../../schemas/entities';
import { defaultFleetPolicy } from '../../schemas/policy';
import { createInFlightRegistry } from './in-flight';
import type { Routing } from './routing-cache';

const FLEET = '00000000-0000-4000-8000-000000000001';
const EAST = '00000000-0000-4000-8000-00000000000e';
const WEST = '00000000-0000-4000-8000-00000000000f';
const DRAIN_MS = 5_000;

/** The routing fields the registry reads; the rest of a snapshot does not matter to it. */
const fleet = (activeDomainId: string, routeRevision: number, eastState: DomainSnapshot['state']): FleetSnapshot =>
  ({
    id: FLEET,
    activeDomainId,
    routeRevision,
    policy: { ...defaultFleetPolicy(), drainTimeoutMs: DRAIN_MS },
    domains: [
      { id: EAST, state: eastState },
      { id: WEST, state: 'ready' },
    ],
  }) as FleetSnapshot;

/** A routing cache whose answer the test sets, and whose moves it emits. */
function fakeCache(initial: FleetSnapshot) {
  let routing: Routing = { snapshot: initial, stale: false };
  let listener: ((fleetId: string, revision: number) => void) | null = null;
  return {
    get: jest.fn(async () => routing),
    onMove(l: (fleetId: string, revision: number) => void) {
      listener = l;
      return () => (listener = null);
    },
    /** The store now says `snapshot` and a push announces it. */
    move(snapshot: FleetSnapshot, stale = false) {
      routing = { snapshot, stale };
      listener?.(FLEET, snapshot.routeRevision);
    },
  };
}

const settle = () => new Promise((resolve) => setImmediate(resolve));

afterEach(() => jest.useRealTimers());

describe('createInFlightRegistry', () => {
  it('cuts at once what was in flight to a domain the route left failed, and leaves the new active alone', async () => {
    const cache = fakeCache(fleet(EAST, 1, 'ready'));
    const registry = createInFlightRegistry({ cache, logger: silentLogger });
    const toEast = registry.enter(FLEET, EAST, 1);
    const done = registry.enter(FLEET, EAST, 1);
    done.leave();
    cache.move(fleet(WEST, 2, 'failed'));
    await settle();
    expect(toEast.aborted).toBe(true);
    expect(done.aborted).toBe(false);

    const toWest = registry.enter(FLEET, WEST, 2);
    cache.move(fleet(WEST, 3, 'failed'));
    await settle();
    expect(toWest.aborted).toBe(false);
    toEast.leave();
    toWest.leave();
    expect(registry.size).toBe(0);
    registry.close();
  });

  it('cuts what a planned move left on a serving domain only after the drain, unless it ended or the route came back', async () => {
    jest.useFakeTimers();
    const cache = fakeCache(fleet(EAST, 1, 'ready'));
    const registry = createInFlightRegistry({ cache, logger: silentLogger });
    const stalled = registry.enter(FLEET, EAST, 1);
    const finishing = registry.enter(FLEET, EAST, 1);
    cache.move(fleet(WEST, 2, 'ready'));
    await jest.advanceTimersByTimeAsync(DRAIN_MS - 1);
    expect(stalled.aborted).toBe(false);
    finishing.leave();
    await jest.advanceTimersByTimeAsync(1);
    expect(stalled.aborted).toBe(true);
    expect(finishing.aborted).toBe(false);

    cache.move(fleet(EAST, 3, 'ready'));
    const back = registry.enter(FLEET, EAST, 3);
    cache.move(fleet(WEST, 4, 'ready'));
    await jest.advanceTimersByTimeAsync(1);
    cache.move(fleet(EAST, 5, 'ready'));
    await jest.advanceTimersByTimeAsync(DRAIN_MS);
    expect(back.aborted).toBe(false);
    registry.close();
  });

  it('reads routing again when the first read answers the revision before the move', async () => {
    const cache = fakeCache(fleet(EAST, 1, 'ready'));
    const registry = createInFlightRegistry({ cache, logger: silentLogger });
    const toEast = registry.enter(FLEET, EAST, 1);
    cache.get.mockResolvedValueOnce({ snapshot: fleet(EAST, 1, 'ready'), stale: false });
    cache.move(fleet(WEST, 2, 'failed'));
    await settle();
    expect(cache.get).toHaveBeenCalledTimes(2);
    expect(toEast.aborted).toBe(true);
    registry.close();
  });

  it('cuts nothing on a stale answer, and reads routing only for a fleet with requests in flight', async () => {
    const cache = fakeCache(fleet(EAST, 1, 'ready'));
    const registry = createInFlightRegistry({ cache, logger: silentLogger });
    cache.move(fleet(WEST, 2, 'failed'));
    await settle();
    expect(cache.get).not.toHaveBeenCalled();

    const toEast = registry.enter(FLEET, EAST, 1);
    cache.move(fleet(WEST, 3, 'failed'), true);
    await settle();
    expect(toEast.aborted).toBe(false);
    registry.close();
  });
});
