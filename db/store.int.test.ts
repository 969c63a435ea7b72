import type { FleetSnapshot } from '../schemas/entities';
import { ROUTE_CHANNEL } from '../schemas/route-push';
import { InvalidTransitionError } from '../schemas/transitions';
import type { HaruDatabase } from './client';
import { testLayout } from './fixtures';
import type { Store } from './store';
import { StoreError } from './store-error';
import { SIGHTING_NEWER_BY_MS } from './repo/domains';
import { createPgliteTestDatabase, createTestDatabase, seedLayout } from './testing';

/** The core repository behaviours, on both backends: a server Postgres and the embedded PGlite. */

interface Backend {
  database: HaruDatabase;
  store: Store;
  drop(): Promise<void>;
}

let clock = new Date('2030-01-01T00:00:00.000Z');
const now = () => clock;
const tick = (ms = 1_000) => {
  clock = new Date(clock.getTime() + ms);
  return clock;
};

const backends: [string, () => Promise<Backend>][] = [
  ['postgres', () => createTestDatabase({ now })],
  ['pglite', () => createPgliteTestDatabase({ now })],
];

/** Listens on `channel` (resolved once LISTEN is active); `payload` is the first one `match` accepts. */
async function nextNotification(database: HaruDatabase, channel: string, match: (p: string) => boolean) {
  let resolve: (payload: string) => void = () => {};
  const payload = new Promise<string>((r) => (resolve = r));
  const stop = await database.listen(channel, (p) => {
    if (match(p)) resolve(p);
  });
  return { payload, stop };
}

describe.each(backends)('store on %s', (_backend, open) => {
  let t: Backend;
  let fleets = 0;
  beforeAll(async () => {
    t = await open();
  }, 60_000);
  afterAll(() => t?.drop());

  /** A fresh fleet (own slug) with domains east (active) and west. */
  async function seedFleet(): Promise<FleetSnapshot & { east: string; west: string }> {
    fleets += 1;
    const slug = `fleet-${fleets}`;
    await seedLayout(t.store, testLayout({ fleet: slug }));
    const snap = (await t.store.fleets.snapshot(slug))!;
    const id = (s: string) => snap.domains.find((d) => d.slug === s)!.id;
    return { ...snap, east: id('east'), west: id('west') };
  }

  const promote = (fleet: { id: string }, target: string) =>
    t.store.operations.create({
      fleetId: fleet.id,
      kind: 'promote',
      targetDomainId: target,
      reason: 'test',
      requestedBy: 'jest',
    });

  it('reads a fleet snapshot by slug and by id, with domains, slots and the routing pointer', async () => {
    const fleet = await seedFleet();
    expect(fleet.activeDomainId).toBe(fleet.east);
    expect(fleet.routeRevision).toBe(0);
    expect(fleet.policy.failureThreshold).toBe(3);
    expect(fleet.inFlightOperation).toBeNull();
    expect(fleet.domains.map((d) => [d.slug, d.isActive, d.state])).toEqual([
      ['east', true, 'provisioning'],
      ['west', false, 'provisioning'],
    ]);
    const east = fleet.domains[0]!;
    expect(east.slots.map((s) => [s.kind, s.gpuIndex, s.state])).toEqual([
      ['inference', 0, 'starting'],
      ['training', 0, 'idle'],
    ]);
    expect(east.slots[0]).toMatchObject({ sleepLevel: 1, models: [{ name: 'm-shared' }] });
    expect(east.slots[1]).toMatchObject({ command: ['node', 'train.js'], env: {} });
    expect(await t.store.fleets.snapshot(fleet.id)).toEqual(await t.store.fleets.snapshot(fleet.slug));
    expect(await t.store.fleets.routeRevision(fleet.id)).toBe(0);
  });

  it('lists every fleet by slug and answers null for unknown or malformed ids', async () => {
    await seedFleet();
    const all = await t.store.fleets.list();
    expect(all.length).toBeGreaterThanOrEqual(1);
    expect(all.map((f) => f.slug)).toEqual([...all.map((f) => f.slug)].sort());
    const missing = '00000000-0000-4000-8000-000000000000';
    expect(await t.store.fleets.snapshot('no-such-fleet')).toBeNull();
    expect(await t.store.fleets.snapshot(missing)).toBeNull();
    expect(await t.store.fleets.routeRevision('not-a-uuid')).toBeNull();
    expect(await t.store.domains.get(missing)).toBeNull();
    expect(await t.store.domains.get('east')).toBeNull();
    expect(await t.store.operations.get('nope')).toBeNull();
    expect(await t.store.slots.listByDomain(missing)).toEqual([]);
  });

  it('moves a domain only from an allowed predecessor, stamping the clock and lastError', async () => {
    const fleet = await seedFleet();
    const at = tick();
    const ready = await t.store.domains.transition(fleet.west, 'ready');
    expect(ready).toMatchObject({ state: 'ready', stateChangedAt: at.toISOString() });
    // ready -> stopped is not an edge: the guarded UPDATE matches nothing and nothing changes.
    expect(await t.store.domains.transition(fleet.west, 'stopped')).toBeNull();
    const failed = await t.store.domains.transition(fleet.west, 'failed', { lastError: 'host down' });
    expect(failed).toMatchObject({ state: 'failed', lastError: 'host down' });
    expect((await t.store.domains.get(fleet.west))!.state).toBe('failed');
  });

  it('records polls: a success resets the failure count, a failure counts up with the error', async () => {
    const fleet = await seedFleet();
    await t.store.domains.recordPoll(fleet.east, { ok: false, at: tick(), error: 'ECONNREFUSED' });
    const twice = await t.store.domains.recordPoll(fleet.east, { ok: false, at: tick(), error: 'timeout' });
    expect(twice).toMatchObject({ consecutiveFailures: 2, lastError: 'timeout', lastSeenAt: null });
    const seenAt = tick();
    const ok = await t.store.domains.recordPoll(fleet.east, { ok: true, at: seenAt });
    expect(ok).toMatchObject({ consecutiveFailures: 0, lastError: null, lastSeenAt: seenAt.toISOString() });
    expect(ok.state).toBe('provisioning');
    await expect(
      t.store.domains.recordPoll('00000000-0000-4000-8000-000000000000', { ok: true, at: seenAt }),
    ).rejects.toThrow(/does not exist/);
  });

  it('records a round of polls in one statement, each row as recordPoll would write it', async () => {
    const fleet = await seedFleet();
    const failedAt = tick();
    await t.store.domains.recordPoll(fleet.west, { ok: true, at: failedAt });
    await t.store.domains.recordPoll(fleet.east, { ok: false, at: failedAt, error: 'ECONNREFUSED' });
    const seenAt = tick();
    const round = await t.store.domains.recordPolls([
      { domainId: fleet.west, ok: false, at: seenAt, error: 'timeout' },
      { domainId: fleet.east, ok: true, at: seenAt },
    ]);
    // In the order asked, whatever order the UPDATE returned them in.
    expect(round.map((d) => d.id)).toEqual([fleet.west, fleet.east]);
    // A failure keeps the last heartbeat and counts up; a success resets the count and clears the error.
    expect(round[0]).toMatchObject({
      consecutiveFailures: 1,
      lastError: 'timeout',
      lastSeenAt: failedAt.toISOString(),
      state: 'provisioning',
    });
    expect(round[1]).toMatchObject({ consecutiveFailures: 0, lastError: null, lastSeenAt: seenAt.toISOString() });
    expect(await t.store.domains.get(fleet.west)).toEqual(round[0]);
    expect(await t.store.domains.get(fleet.east)).toEqual(round[1]);
    const again = await t.store.domains.recordPolls([{ domainId: fleet.west, ok: false, at: tick() }]);
    expect(again[0]).toMatchObject({ consecutiveFailures: 2, lastError: 'poll failed' });
    // A refusal confirmed at once counts as several failed polls.
    const confirmed = await t.store.domains.recordPolls([
      { domainId: fleet.west, ok: false, at: tick(), error: 'refused, confirmed', failures: 3 },
    ]);
    expect(confirmed[0]).toMatchObject({ consecutiveFailures: 5, lastError: 'refused, confirmed' });
    expect(await t.store.domains.recordPoll(fleet.west, { ok: false, at: tick(), failures: 2 })).toMatchObject({
      consecutiveFailures: 7,
    });
    // Any state: the poll write never guards on it (the monitor moves states with `transition`).
    await t.store.domains.transition(fleet.east, 'failed', { lastError: 'host down' });
    const [failed] = await t.store.domains.recordPolls([{ domainId: fleet.east, ok: true, at: tick() }]);
    expect(failed).toMatchObject({ state: 'failed', consecutiveFailures: 0, lastError: null });
    expect(await t.store.domains.recordPolls([])).toEqual([]);
    await expect(
      t.store.domains.recordPolls([
        { domainId: fleet.east, ok: true, at: tick() },
        { domainId: fleet.east, ok: false, at: tick() },
      ]),
    ).rejects.toThrow(/twice/);
    const unknownAt = tick();
    await expect(
      t.store.domains.recordPolls([
        { domainId: fleet.west, ok: true, at: unknownAt },
        { domainId: '00000000-0000-4000-8000-000000000000', ok: true, at: unknownAt },
      ]),
    ).rejects.toThrow(/00000000-0000-4000-8000-000000000000 does not exist/);
    // The known domain's poll is recorded anyway, as a separate recordPoll would have been.
    expect((await t.store.domains.get(fleet.west))!).toMatchObject({
      consecutiveFailures: 0,
      lastSeenAt: unknownAt.toISOString(),
    });
  });

  it("moves a failed poll's row up to the poller's unwritten sighting, never back", async () => {
    const fleet = await seedFleet();
    const writtenAt = tick();
    await t.store.domains.recordPoll(fleet.west, { ok: true, at: writtenAt });
    const heardAt = tick(); // a success the poller did not write (within its refresh interval)
    const [failed] = await t.store.domains.recordPolls([
      { domainId: fleet.west, ok: false, at: tick(), error: 'timeout', lastSeenAt: heardAt },
      { domainId: fleet.east, ok: false, at: tick(), error: 'timeout' },
    ]);
    expect(failed).toMatchObject({ consecutiveFailures: 1, lastSeenAt: heardAt.toISOString() });
    expect(
      await t.store.domains.recordPoll(fleet.west, { ok: false, at: tick(), lastSeenAt: writtenAt }),
    ).toMatchObject({
      consecutiveFailures: 2,
      lastSeenAt: heardAt.toISOString(),
    });
    expect(await t.store.domains.get(fleet.east)).toMatchObject({ consecutiveFailures: 1, lastSeenAt: null });
  });

  it('counts the failed polls since the domain was last heard: a newer sighting starts the count again', async () => {
    const fleet = await seedFleet();
    await t.store.domains.recordPoll(fleet.west, { ok: true, at: tick() });
    const heardAt = tick();
    for (const failures of [1, 2, 3]) {
      const [row] = await t.store.domains.recordPolls([
        { domainId: fleet.west, ok: false, at: tick(), error: 'timeout', lastSeenAt: heardAt },
      ]);
      expect(row).toMatchObject({ consecutiveFailures: failures, lastSeenAt: heardAt.toISOString() });
    }
    // The same answer as another worker heard it, a few milliseconds apart: no news, the count goes on.
    const [sameAnswer] = await t.store.domains.recordPolls([
      { domainId: fleet.west, ok: false, at: tick(), lastSeenAt: new Date(heardAt.getTime() + 5) },
    ]);
    expect(sameAnswer).toMatchObject({ consecutiveFailures: 4 });
    // Heard again between two failed polls (an answer the proxy relayed): one failed poll since.
    const heardAgainAt = new Date(heardAt.getTime() + 5 + SIGHTING_NEWER_BY_MS + 1);
    const [restarted] = await t.store.domains.recordPolls([
      { domainId: fleet.west, ok: false, at: tick(), error: 'timeout', lastSeenAt: heardAgainAt },
    ]);
    expect(restarted).toMatchObject({ consecutiveFailures: 1, lastSeenAt: heardAgainAt.toISOString() });
    // The one-poll write follows the same rule, and a confirmed refusal still counts whole.
    expect(
      await t.store.domains.recordPoll(fleet.west, { ok: false, at: tick(), lastSeenAt: tick(), failures: 3 }),
    ).toMatchObject({ consecutiveFailures: 3 });
    expect(await t.store.domains.recordPoll(fleet.west, { ok: false, at: tick(), lastSeenAt: tick() })).toMatchObject({
      consecutiveFailures: 1,
    });
    // Never heard at all: a sighting is newer than none.
    const [first] = await t.store.domains.recordPolls([
      { domainId: fleet.east, ok: false, at: tick(), lastSeenAt: tick() },
    ]);
    expect(first).toMatchObject({ consecutiveFailures: 1 });
  });

  it('moves slots by the transition table of their kind', async () => {
    const fleet = await seedFleet();
    const [inference, training] = await t.store.slots.listByDomain(fleet.west);
    expect(await t.store.slots.transition(inference!.id, 'sleeping')).toMatchObject({ state: 'sleeping' });
    // 'training' is a training-slot state: an inference slot never matches it.
    expect(await t.store.slots.transition(inference!.id, 'training')).toBeNull();
    expect(await t.store.slots.transition(training!.id, 'training', ['idle'])).toMatchObject({ state: 'training' });
    // `from` narrows the guard: the slot is training, not failed, so nothing happens.
    expect(await t.store.slots.transition(training!.id, 'idle', ['failed'])).toBeNull();
    await expect(t.store.slots.transition(training!.id, 'serving', ['idle'])).rejects.toThrow(InvalidTransitionError);
  });

  it('creates one operation per fleet: the same request joins, another one conflicts', async () => {
    const fleet = await seedFleet();
    const first = await promote(fleet, fleet.west);
    expect(first.outcome).toBe('created');
    expect(first.operation).toMatchObject({
      state: 'pending',
      kind: 'promote',
      targetDomainId: fleet.west,
      fromDomainId: fleet.east,
      workflowId: `haru/${fleet.id}/op/${first.operation.id}`,
      routingCommitted: false,
      routeRevision: null,
      createdAt: clock.toISOString(),
    });
    const again = await promote(fleet, fleet.west);
    expect(again).toEqual({ outcome: 'joined', operation: first.operation });
    const demote = await t.store.operations.create({
      fleetId: fleet.id,
      kind: 'demote',
      targetDomainId: fleet.west,
      reason: 'test',
      requestedBy: 'jest',
    });
    expect(demote).toMatchObject({ outcome: 'conflict', operation: { id: first.operation.id } });
    expect((await t.store.fleets.snapshot(fleet.id))!.inFlightOperation?.id).toBe(first.operation.id);
  });

  it('refuses an operation on a domain of another fleet', async () => {
    const a = await seedFleet();
    const b = await seedFleet();
    const err = await promote(a, b.west).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(StoreError);
    expect(err).toMatchObject({ code: 'invalid_reference' });
    expect(await t.store.operations.list(a.id)).toEqual([]);
  });

  it('runs an operation: start is idempotent, steps are recorded, success is final', async () => {
    const fleet = await seedFleet();
    const { operation } = await promote(fleet, fleet.west);
    const startedAt = tick();
    const started = await t.store.operations.start(operation.id);
    expect(started).toMatchObject({ state: 'running', startedAt: startedAt.toISOString() });
    tick();
    expect(await t.store.operations.start(operation.id)).toMatchObject({ startedAt: startedAt.toISOString() });
    expect(await t.store.operations.setStep(operation.id, 'wakeModels')).toMatchObject({ step: 'wakeModels' });
    const doneAt = tick();
    expect(await t.store.operations.succeed(operation.id)).toMatchObject({
      state: 'succeeded',
      finishedAt: doneAt.toISOString(),
    });
    expect(await t.store.operations.fail(operation.id, { step: 'x', code: 'y', message: 'z' })).toBeNull();
    expect(await t.store.operations.setStep(operation.id, 'probeModels')).toBeNull();
    expect(await t.store.operations.start(operation.id)).toBeNull();
    // The fleet's in-flight slot is free again.
    expect((await promote(fleet, fleet.west)).outcome).toBe('created');
  });

  it('fails or cancels an operation with step, code and message', async () => {
    const fleet = await seedFleet();
    const one = (await promote(fleet, fleet.west)).operation;
    await t.store.operations.start(one.id);
    const error = { step: 'probeModels', code: 'ProbeFailed', message: 'm-shared answered 500' };
    expect(await t.store.operations.fail(one.id, error)).toMatchObject({ state: 'failed', step: 'probeModels', error });
    const two = (await promote(fleet, fleet.west)).operation;
    const cancelled = await t.store.operations.cancel(two.id, {
      step: 'stopTraining',
      code: 'aborted',
      message: 'by user',
    });
    expect(cancelled).toMatchObject({ state: 'cancelled', error: { code: 'aborted' } });
    await expect(t.store.operations.transition(two.id, 'pending')).rejects.toThrow(InvalidTransitionError);
  });

  it("lists a fleet's operations newest first, none of another fleet's", async () => {
    const a = await seedFleet();
    const b = await seedFleet();
    const old = (await promote(a, a.west)).operation;
    await t.store.operations.cancel(old.id, { step: 'none', code: 'test', message: 'test' });
    tick();
    const newer = (await promote(a, a.west)).operation;
    tick();
    await promote(b, b.west);
    expect((await t.store.operations.list(a.id)).map((o) => o.id)).toEqual([newer.id, old.id]);
    expect((await t.store.operations.list(a.id, { limit: 1 })).map((o) => o.id)).toEqual([newer.id]);
  });

  it('commits routing once, notifies LISTEN haru_route, and answers a repeat with already_committed', async () => {
    const fleet = await seedFleet();
    const { operation } = await promote(fleet, fleet.west);
    await t.store.operations.start(operation.id);
    const heard = await nextNotification(t.database, ROUTE_CHANNEL, (p) => p.includes(fleet.id));
    try {
      const input = {
        fleetId: fleet.id,
        operationId: operation.id,
        expectedActiveDomainId: fleet.east,
        targetDomainId: fleet.west,
      };
      expect(await t.store.fleets.commitRouting(input)).toEqual({
        outcome: 'committed',
        routeRevision: 1,
        activeDomainId: fleet.west,
      });
      expect(JSON.parse(await heard.payload)).toEqual({ fleetId: fleet.id, revision: 1, activeDomainId: fleet.west });
      expect(await t.store.fleets.commitRouting(input)).toEqual({
        outcome: 'already_committed',
        routeRevision: 1,
        activeDomainId: fleet.west,
      });
    } finally {
      await heard.stop();
    }
    expect(await t.store.operations.get(operation.id)).toMatchObject({ routingCommitted: true, routeRevision: 1 });
    const after = (await t.store.fleets.snapshot(fleet.id))!;
    expect([after.routeRevision, after.activeDomainId]).toEqual([1, fleet.west]);
    expect(after.domains.find((d) => d.isActive)?.slug).toBe('west');
  });

  it('loses the routing CAS to a stale pointer or a non-running operation and changes nothing', async () => {
    const fleet = await seedFleet();
    const { operation } = await promote(fleet, fleet.west);
    const input = {
      fleetId: fleet.id,
      operationId: operation.id,
      expectedActiveDomainId: fleet.east,
      targetDomainId: fleet.west,
    };
    // Still pending: not running, so it may not move the pointer.
    expect(await t.store.fleets.commitRouting(input)).toEqual({
      outcome: 'conflict',
      routeRevision: 0,
      activeDomainId: fleet.east,
    });
    await t.store.operations.start(operation.id);
    expect(await t.store.fleets.commitRouting({ ...input, expectedActiveDomainId: fleet.west })).toEqual({
      outcome: 'conflict',
      routeRevision: 0,
      activeDomainId: fleet.east,
    });
    expect(await t.store.fleets.commitRouting({ ...input, expectedActiveDomainId: null })).toMatchObject({
      outcome: 'conflict',
    });
    // A target other than the operation's own never commits.
    expect(await t.store.fleets.commitRouting({ ...input, targetDomainId: fleet.east })).toMatchObject({
      outcome: 'conflict',
    });
    expect(await t.store.operations.get(operation.id)).toMatchObject({ routingCommitted: false, routeRevision: null });
    expect(await t.store.fleets.routeRevision(fleet.id)).toBe(0);
    const other = await seedFleet();
    await expect(t.store.fleets.commitRouting({ ...input, fleetId: other.id })).rejects.toMatchObject({
      name: 'StoreError',
      code: 'not_found',
      entity: 'operation',
    });
  });

  it('never moves the pointer for a demotion, even a running one', async () => {
    const fleet = await seedFleet();
    const { operation } = await t.store.operations.create({
      fleetId: fleet.id,
      kind: 'demote',
      targetDomainId: fleet.west,
      reason: 'test',
      requestedBy: 'jest',
    });
    await t.store.operations.start(operation.id);
    const input = {
      fleetId: fleet.id,
      operationId: operation.id,
      expectedActiveDomainId: fleet.east,
      targetDomainId: fleet.west,
    };
    expect(await t.store.fleets.commitRouting(input)).toEqual({
      outcome: 'conflict',
      routeRevision: 0,
      activeDomainId: fleet.east,
    });
  });

  it('appends events and pages them in id order with an after cursor', async () => {
    const fleet = await seedFleet();
    const before = await t.store.events.list(fleet.id);
    const appended = [];
    for (const n of [1, 2, 3]) {
      appended.push(
        await t.store.events.append({
          fleetId: fleet.id,
          domainId: fleet.east,
          type: 'test.tick',
          message: `tick ${n}`,
          data: { n },
        }),
      );
    }
    expect(appended[0]).toMatchObject({ type: 'test.tick', domainId: fleet.east, operationId: null, data: { n: 1 } });
    const cursor = before.at(-1)?.id ?? 0;
    const page = await t.store.events.list(fleet.id, { after: cursor, limit: 2 });
    expect(page.map((e) => e.message)).toEqual(['tick 1', 'tick 2']);
    const rest = await t.store.events.list(fleet.id, { after: page[1]!.id });
    expect(rest.map((e) => e.message)).toEqual(['tick 3']);
  });
});
