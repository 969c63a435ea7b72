import postgres from 'postgres';
import { testLayout } from './fixtures';
import { createTestDatabase, seedLayout, type TestDatabase } from './testing';

/**
 * The two compare-and-swaps under real concurrency: 20 callers at once, each on its own pooled
 * connection, against a server Postgres.
 */

const CALLERS = 20;
let t: TestDatabase;
let fleetCount = 0;

beforeAll(async () => {
  t = await createTestDatabase({ max: CALLERS });
  // Open every pooled connection up front so the calls below really overlap.
  await Promise.all(Array.from({ length: CALLERS }, () => t.database.ping()));
});
afterAll(() => t?.drop());

async function seedFleet() {
  fleetCount += 1;
  const slug = `race-${fleetCount}`;
  await seedLayout(t.store, testLayout({ fleet: slug, domains: ['east', 'west', 'north'] }));
  const snap = (await t.store.fleets.snapshot(slug))!;
  const id = (s: string) => snap.domains.find((d) => d.slug === s)!.id;
  return { id: snap.id, east: id('east'), west: id('west'), north: id('north') };
}

const request = (fleetId: string, target: string, kind: 'promote' | 'demote' = 'promote') => ({
  fleetId,
  kind,
  targetDomainId: target,
  reason: 'race',
  requestedBy: 'jest',
});

/** A fresh fleet with a running promotion of west, and the commit that promotion would make. */
async function runningPromotionOfWest() {
  const fleet = await seedFleet();
  const { operation } = await t.store.operations.create(request(fleet.id, fleet.west));
  await t.store.operations.start(operation.id);
  const input = {
    fleetId: fleet.id,
    operationId: operation.id,
    expectedActiveDomainId: fleet.east,
    targetDomainId: fleet.west,
  };
  return { fleet, operation, input };
}

describe('commitRouting under concurrency', () => {
  it('lets exactly one of 20 concurrent commits win and bumps the revision exactly once', async () => {
    const { fleet, operation, input } = await runningPromotionOfWest();
    const results = await Promise.all(Array.from({ length: CALLERS }, () => t.store.fleets.commitRouting(input)));
    const outcomes = results.map((r) => r.outcome);
    expect(outcomes.filter((o) => o === 'committed')).toHaveLength(1);
    expect(outcomes.filter((o) => o === 'already_committed')).toHaveLength(CALLERS - 1);
    // Every caller learns the same revision: the one the winner wrote.
    expect(new Set(results.map((r) => `${r.routeRevision}/${r.activeDomainId}`))).toEqual(new Set([`1/${fleet.west}`]));
    expect(await t.store.fleets.routeRevision(fleet.id)).toBe(1);
    expect(await t.store.operations.get(operation.id)).toMatchObject({ routingCommitted: true, routeRevision: 1 });
  });

  it('makes every concurrent commit with a stale expected pointer lose without changing anything', async () => {
    const fleet = await seedFleet();
    const { operation } = await t.store.operations.create(request(fleet.id, fleet.west));
    await t.store.operations.start(operation.id);
    const before = await t.store.fleets.snapshot(fleet.id);
    // The pointer is east; these callers believe it is north.
    const stale = {
      fleetId: fleet.id,
      operationId: operation.id,
      expectedActiveDomainId: fleet.north,
      targetDomainId: fleet.west,
    };
    const results = await Promise.all(Array.from({ length: CALLERS }, () => t.store.fleets.commitRouting(stale)));
    expect(results).toEqual(
      Array.from({ length: CALLERS }, () => ({ outcome: 'conflict', routeRevision: 0, activeDomainId: fleet.east })),
    );
    expect(await t.store.fleets.snapshot(fleet.id)).toEqual(before);
    // The same operation with the right pointer still commits afterwards.
    const fresh = await t.store.fleets.commitRouting({ ...stale, expectedActiveDomainId: fleet.east });
    expect(fresh).toEqual({ outcome: 'committed', routeRevision: 1, activeDomainId: fleet.west });
  });

  it('lets exactly one commit win when callers with stale and fresh pointers race', async () => {
    const fleet = await seedFleet();
    const { operation } = await t.store.operations.create(request(fleet.id, fleet.west));
    await t.store.operations.start(operation.id);
    const base = { fleetId: fleet.id, operationId: operation.id, targetDomainId: fleet.west };
    const results = await Promise.all(
      Array.from({ length: CALLERS }, (_, i) =>
        t.store.fleets.commitRouting({ ...base, expectedActiveDomainId: i % 2 ? fleet.east : fleet.north }),
      ),
    );
    expect(results.filter((r) => r.outcome === 'committed')).toHaveLength(1);
    expect(await t.store.fleets.routeRevision(fleet.id)).toBe(1);
  });
});

describe('commitRouting against a held fleet row', () => {
  it('fails at once instead of queueing behind the lock (a queued commit could land after its step gave up), and commits once the row is free', async () => {
    const { fleet, operation, input } = await runningPromotionOfWest();
    const other = postgres(t.url, { max: 1, onnotice: () => {} });
    try {
      let release!: () => void;
      let locked!: () => void;
      const isLocked = new Promise<void>((resolve) => (locked = resolve));
      const holder = other.begin(async (tx) => {
        await tx`select id from fleets where id = ${fleet.id} for no key update`;
        locked();
        await new Promise<void>((resolve) => (release = resolve));
      });
      await isLocked;
      await expect(t.store.fleets.commitRouting(input)).rejects.toMatchObject({
        name: 'StoreError',
        code: 'unavailable',
        message: expect.stringMatching(/held by another transaction/),
      });
      expect(await t.store.fleets.routeRevision(fleet.id)).toBe(0);
      expect(await t.store.operations.get(operation.id)).toMatchObject({ routingCommitted: false });
      release();
      await holder;
      expect(await t.store.fleets.commitRouting(input)).toMatchObject({ outcome: 'committed', routeRevision: 1 });
    } finally {
      await other.end({ timeout: 5 });
    }
  });
});

describe('operation create under concurrency', () => {
  it('creates one of 20 concurrent identical requests and joins the rest to the same id', async () => {
    const fleet = await seedFleet();
    const results = await Promise.all(
      Array.from({ length: CALLERS }, () => t.store.operations.create(request(fleet.id, fleet.west))),
    );
    expect(results.filter((r) => r.outcome === 'created')).toHaveLength(1);
    expect(results.filter((r) => r.outcome === 'joined')).toHaveLength(CALLERS - 1);
    expect(new Set(results.map((r) => r.operation.id)).size).toBe(1);
    expect(await t.store.operations.list(fleet.id)).toHaveLength(1);
  });

  it('answers a different target with a conflict, and frees the slot once the operation finishes', async () => {
    const fleet = await seedFleet();
    const first = await t.store.operations.create(request(fleet.id, fleet.west));
    const rivals = await Promise.all(
      Array.from({ length: CALLERS }, (_, i) =>
        t.store.operations.create(i % 2 ? request(fleet.id, fleet.north) : request(fleet.id, fleet.west, 'demote')),
      ),
    );
    expect(rivals.every((r) => r.outcome === 'conflict' && r.operation.id === first.operation.id)).toBe(true);
    await t.store.operations.start(first.operation.id);
    await t.store.operations.succeed(first.operation.id);
    const next = await Promise.all(
      Array.from({ length: CALLERS }, () => t.store.operations.create(request(fleet.id, fleet.north))),
    );
    expect(next.filter((r) => r.outcome === 'created')).toHaveLength(1);
    expect(new Set(next.map((r) => r.operation.id)).size).toBe(1);
    expect(next[0]!.operation.id).not.toBe(first.operation.id);
    expect(await t.store.operations.list(fleet.id)).toHaveLength(2);
  });
});
