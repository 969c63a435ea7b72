import type { FleetSnapshot } from '../../schemas/entities';
import { defaultFleetPolicy } from '../../schemas/policy';
import { createRoutingCache } from './routing-cache';

const T = '2026-01-01T00:00:00.000Z';
const snap = (n: number, revision = 1): FleetSnapshot => ({
  id: `00000000-0000-4000-8000-${String(n).padStart(12, '0')}`,
  slug: `f${n}`,
  displayName: `f${n}`,
  activeDomainId: null,
  routeRevision: revision,
  policy: defaultFleetPolicy(),
  createdAt: T,
  updatedAt: T,
  domains: [],
  inFlightOperation: null,
});

/** An in-memory store with counters: the cache's contract with its store is what is under test. */
function fakeStore(fleets: FleetSnapshot[]) {
  const calls = { snapshot: 0, revision: 0 };
  let down = false;
  const find = (ref: string) => fleets.find((f) => f.id === ref || f.slug === ref) ?? null;
  return {
    calls,
    fleets,
    setDown(v: boolean) {
      down = v;
    },
    store: {
      fleets: {
        list: async () => fleets,
        snapshot: async (ref: string) => {
          calls.snapshot++;
          if (down) throw Object.assign(new Error('connection refused'), { code: 'ECONNREFUSED' });
          return find(ref);
        },
        routeRevision: async (id: string) => {
          calls.revision++;
          if (down) throw Object.assign(new Error('connection refused'), { code: 'ECONNREFUSED' });
          return find(id)?.routeRevision ?? null;
        },
      },
    },
  };
}

describe('routing cache', () => {
  let clock = 0;
  const now = () => new Date(clock);
  beforeEach(() => {
    clock = 1_000_000;
  });

  it('serves within the TTL without reading the store, then revalidates with the cheap revision read', async () => {
    const s = fakeStore([snap(1)]);
    const cache = createRoutingCache({ store: s.store, ttlMs: 100, maxEntries: 10, storeTimeoutMs: 50, now });
    await cache.get('f1');
    await cache.get('f1');
    expect(s.calls).toEqual({ snapshot: 1, revision: 0 });
    clock += 101;
    await cache.get('f1');
    expect(s.calls).toEqual({ snapshot: 1, revision: 1 });
    s.fleets[0] = snap(1, 2);
    clock += 101;
    const moved = await cache.get('f1');
    expect(moved.snapshot.routeRevision).toBe(2);
    expect(s.calls).toEqual({ snapshot: 2, revision: 2 });
  });

  it('shares one store read among concurrent requests for a fleet', async () => {
    const s = fakeStore([snap(1)]);
    const cache = createRoutingCache({ store: s.store, ttlMs: 100, maxEntries: 10, storeTimeoutMs: 50, now });
    await Promise.all(Array.from({ length: 20 }, () => cache.get('f1')));
    expect(s.calls.snapshot).toBe(1);
  });

  it('evicts the least recently used fleet beyond maxEntries', async () => {
    const s = fakeStore([snap(1), snap(2), snap(3)]);
    const cache = createRoutingCache({ store: s.store, ttlMs: 10_000, maxEntries: 2, storeTimeoutMs: 50, now });
    await cache.get('f1');
    await cache.get('f2');
    await cache.get('f1'); // f2 is now the least recent
    await cache.get('f3');
    expect(cache.size).toBe(2);
    const before = s.calls.snapshot;
    await cache.get('f1');
    expect(s.calls.snapshot).toBe(before);
    await cache.get('f2');
    expect(s.calls.snapshot).toBe(before + 1);
  });

  it('applies a newer pushed revision at once and ignores duplicates and stale pushes', async () => {
    const s = fakeStore([snap(1, 5)]);
    const cache = createRoutingCache({ store: s.store, ttlMs: 60_000, maxEntries: 10, storeTimeoutMs: 50, now });
    const moves: number[] = [];
    cache.onMove((_id, revision) => moves.push(revision));
    await cache.get('f1');
    cache.handlePush(JSON.stringify({ fleetId: snap(1).id, revision: 5, activeDomainId: null }));
    cache.handlePush(JSON.stringify({ fleetId: snap(1).id, revision: 4, activeDomainId: null }));
    cache.handlePush('not json');
    expect(moves).toEqual([]);
    s.fleets[0] = snap(1, 6);
    cache.handlePush(JSON.stringify({ fleetId: snap(1).id, revision: 6, activeDomainId: null }));
    expect(moves).toEqual([6]);
    expect((await cache.get('f1')).snapshot.routeRevision).toBe(6);
  });

  it('serves the last known routing as stale while the store is down, backing off between attempts', async () => {
    const s = fakeStore([snap(1), snap(2)]);
    const cache = createRoutingCache({ store: s.store, ttlMs: 100, maxEntries: 10, storeTimeoutMs: 50, now });
    await cache.get('f1');
    s.setDown(true);
    clock += 101;
    expect(await cache.get('f1')).toMatchObject({ stale: true });
    const attempts = s.calls.revision;
    expect(await cache.get('f1')).toMatchObject({ stale: true });
    expect(s.calls.revision).toBe(attempts); // within the backoff: no store read
    await expect(cache.get('f2')).rejects.toMatchObject({ code: 'state_store_unavailable' });
    s.setDown(false);
    clock += 101;
    expect(await cache.get('f1')).toMatchObject({ stale: false });
  });

  it('reads a pushed move at once even while backing off from a store failure', async () => {
    const s = fakeStore([snap(1, 1)]);
    const cache = createRoutingCache({ store: s.store, ttlMs: 100, maxEntries: 10, storeTimeoutMs: 50, now });
    await cache.get('f1');
    s.setDown(true);
    clock += 101;
    expect(await cache.get('f1')).toMatchObject({ stale: true });
    s.setDown(false);
    s.fleets[0] = snap(1, 2);
    cache.handlePush(JSON.stringify({ fleetId: snap(1).id, revision: 2, activeDomainId: null }));
    expect(await cache.get('f1')).toMatchObject({ stale: false, snapshot: { routeRevision: 2 } });
  });

  it('bounds a hanging store read by storeTimeoutMs', async () => {
    const hanging = {
      fleets: {
        list: async () => [],
        snapshot: () => new Promise<FleetSnapshot | null>(() => {}),
        routeRevision: () => new Promise<number | null>(() => {}),
      },
    };
    const cache = createRoutingCache({ store: hanging, ttlMs: 100, maxEntries: 10, storeTimeoutMs: 20 });
    await expect(cache.get('f1')).rejects.toMatchObject({ code: 'state_store_unavailable' });
  });

  it('forgets a fleet that no longer exists', async () => {
    const s = fakeStore([snap(1)]);
    const cache = createRoutingCache({ store: s.store, ttlMs: 100, maxEntries: 10, storeTimeoutMs: 50, now });
    await cache.get('f1');
    s.fleets.length = 0;
    clock += 101;
    await expect(cache.get('f1')).rejects.toMatchObject({ code: 'fleet_not_found' });
    expect(cache.size).toBe(0);
  });

  it('remembers an unknown fleet for missTtlMs: a flood of requests for it makes one store read', async () => {
    const s = fakeStore([snap(1)]);
    const cache = createRoutingCache({ store: s.store, ttlMs: 100, maxEntries: 10, storeTimeoutMs: 50, now });
    const asks = await Promise.allSettled(Array.from({ length: 200 }, () => cache.get('nope')));
    for (let i = 0; i < 50; i++) await expect(cache.refresh('nope')).rejects.toMatchObject({ code: 'fleet_not_found' });
    expect(
      asks.every((a) => a.status === 'rejected' && (a.reason as { code: string }).code === 'fleet_not_found'),
    ).toBe(true);
    expect(s.calls.snapshot).toBe(1);
    // Past the interval the store is asked again, and a fleet created meanwhile is found.
    s.fleets.push({ ...snap(2), slug: 'nope' });
    clock += 100;
    expect((await cache.get('nope')).snapshot.slug).toBe('nope');
    expect(s.calls.snapshot).toBe(2);
  });

  it('bounds the unknown names it remembers by maxEntries', async () => {
    const s = fakeStore([]);
    const cache = createRoutingCache({ store: s.store, ttlMs: 1_000, maxEntries: 2, storeTimeoutMs: 50, now });
    for (const ref of ['a', 'b', 'c']) await expect(cache.get(ref)).rejects.toMatchObject({ code: 'fleet_not_found' });
    expect(s.calls.snapshot).toBe(3);
    await expect(cache.get('c')).rejects.toMatchObject({ code: 'fleet_not_found' });
    expect(s.calls.snapshot).toBe(3);
    await expect(cache.get('a')).rejects.toMatchObject({ code: 'fleet_not_found' }); // evicted: read again
    expect(s.calls.snapshot).toBe(4);
  });
});
