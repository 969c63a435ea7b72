/**
 * The monitor's poll loop against real Postgres: the heartbeats, state transitions and events it writes,
 * and its races with other writers of a domain's row. Supervisors are scripted hosts.
 */
import { ApplicationFailure, CancelledFailure } from '@temporalio/common';
import { eq } from 'drizzle-orm';
import { testLayout } from '../db/fixtures';
import { domains as domainsTable } from '../db/schema';
import { createTestDatabase, seedLayout, type TestDatabase } from '../db/testing';
import type { Store } from '../db/store';
import { FailureType } from '../schemas/failures';
import { quietEnvironment, runIn } from '../test/support/activity-environment';
import { FakeHost, routedClient, unreachable } from '../test/support/fake-host';
import { eventually } from '../test/support/eventually';
import { createFleetMonitorActivities, type WatchFleetInput } from './fleet-monitor';
import { createProofOfLife, type ProofOfLife } from './proof-of-life';

let tdb: TestDatabase;
beforeAll(async () => {
  tdb = await createTestDatabase();
});
afterAll(() => tdb?.drop());

it('does not move a failed standby to ready over a provisioning that started during the round', async () => {
  const { fleetId } = await seedLayout(tdb.store, testLayout({ fleet: 'race-monitor' }));
  const snapshot = (await tdb.store.fleets.snapshot(fleetId))!;
  const [east, west] = snapshot.domains;
  await tdb.store.domains.transition(west!.id, 'failed', { lastError: 'gone' });
  const hosts = Object.fromEntries(
    snapshot.domains.map((d) => {
      const host = new FakeHost();
      host.models[0]!.state = d.id === east!.id ? 'awake' : 'asleep';
      return [d.supervisorUrl, host];
    }),
  );
  // The standby answers again; meanwhile (after the round read the fleet) a provisioning takes the row.
  const store: Store = {
    ...tdb.store,
    domains: {
      ...tdb.store.domains,
      async recordPolls(polls) {
        await tdb.store.domains.transition(west!.id, 'provisioning', { from: ['failed'] });
        return tdb.store.domains.recordPolls(polls);
      },
    },
  };
  const acts = createFleetMonitorActivities({ store, supervisor: routedClient(hosts), now: () => new Date() });
  await runIn(quietEnvironment({ attempt: 1 }), acts.watchFleet, {
    fleetId,
    isAutoFailoverPaused: false,
    isImmediate: true,
    checkpointMs: 60_000,
    pendingGraceMs: 10_000,
    alreadyTriedIds: [],
    coolingDownIds: [],
  });
  expect((await tdb.store.domains.get(west!.id))!.state).toBe('provisioning');
  const moves = (await tdb.store.events.list(fleetId)).filter((e) => e.type === 'domain.state');
  expect(moves.map((e) => e.message)).not.toContainEqual(expect.stringMatching(/west: failed -> ready/));
});

it('times the degraded grace from continuous watching, not from a degradation recorded before an outage', async () => {
  const { fleetId } = await seedLayout(tdb.store, testLayout({ fleet: 'degraded-grace' }));
  const snapshot = (await tdb.store.fleets.snapshot(fleetId))!;
  const [east] = snapshot.domains;
  // The active has been degraded for an hour as the store tells it (one of its models asleep).
  await tdb.store.domains.transition(east!.id, 'degraded', { lastError: 'model asleep' });
  const anHourAgo = new Date(Date.now() - 3_600_000);
  await tdb.database.db.update(domainsTable).set({ stateChangedAt: anHourAgo }).where(eq(domainsTable.id, east!.id));
  const hosts = Object.fromEntries(snapshot.domains.map((d) => [d.supervisorUrl, new FakeHost()]));
  const acts = createFleetMonitorActivities({
    store: tdb.store,
    supervisor: routedClient(hosts),
    now: () => new Date(),
  });
  const watch = (over: { watchingSince?: string; lookedUntil?: string }) =>
    runIn(quietEnvironment({ attempt: 1 }), acts.watchFleet, {
      fleetId,
      isAutoFailoverPaused: false,
      isImmediate: false,
      checkpointMs: 300,
      pendingGraceMs: 10_000,
      alreadyTriedIds: [],
      coolingDownIds: [],
      ...over,
    });
  const twoHoursAgo = new Date(Date.now() - 7_200_000).toISOString();
  // Watches that followed one another since before the degradation: the 30 s grace has long run out.
  expect((await watch({ watchingSince: twoHoursAgo, lookedUntil: new Date().toISOString() })).reason).toBe(
    'decision_due',
  );
  // The first watch after an outage (its last look an hour ago): no failover until the grace is watched.
  const resumed = await watch({ watchingSince: twoHoursAgo, lookedUntil: anHourAgo.toISOString() });
  expect(resumed.reason).toBe('checkpoint');
  expect(resumed.fleet.domains.find((d) => d.id === east!.id)).toMatchObject({ state: 'degraded' });
  expect(Date.parse(resumed.watchingSince!)).toBeGreaterThan(Date.now() - 60_000);
});

describe('watchFleet', () => {
  const POLICY = { heartbeatIntervalMs: 5, heartbeatStaleMs: 60_000, failureThreshold: 3 };
  let fleets = 0;

  /** A fresh fleet (east active and serving, west a sleeping standby, both ready) and a watch over it. */
  async function setup(proofOfLife?: ProofOfLife, heartbeatTimeoutMs?: number) {
    const { fleetId } = await seedLayout(tdb.store, testLayout({ fleet: `watch-${++fleets}`, policy: POLICY }));
    const snapshot = (await tdb.store.fleets.snapshot(fleetId))!;
    for (const d of snapshot.domains) await tdb.store.domains.transition(d.id, 'ready');
    const [east, west] = snapshot.domains as [(typeof snapshot.domains)[number], (typeof snapshot.domains)[number]];
    const model = east.slots.find((s) => s.kind === 'inference')!.models[0]!.name;
    const a = new FakeHost();
    a.models[0]!.name = model;
    a.models[0]!.state = 'awake';
    a.training = [{ gpuIndex: 0, state: 'idle', pids: [], startedAt: null, lastExit: null }];
    const b = new FakeHost();
    b.models[0]!.name = model;
    const polled: string[] = [];
    const acts = createFleetMonitorActivities({
      store: tdb.store,
      supervisor: routedClient({ [east.supervisorUrl]: a, [west.supervisorUrl]: b }),
      now: () => new Date(),
      proofOfLife,
      metrics: {
        domainPolled: (l) => polled.push(`${l.domain}:${l.outcome}`),
        routingCommit: () => undefined,
        operationFinished: () => undefined,
        stepSucceeded: () => undefined,
        hostObserved: () => undefined,
      },
    });
    const env = quietEnvironment({ attempt: 1, heartbeatTimeoutMs });
    const heartbeats: unknown[] = [];
    env.on('heartbeat', (d: unknown) => heartbeats.push(d));
    const watch = (over: Partial<WatchFleetInput> = {}) =>
      runIn(env, acts.watchFleet, {
        fleetId,
        isAutoFailoverPaused: false,
        isImmediate: false,
        checkpointMs: 60_000,
        pendingGraceMs: 10_000,
        alreadyTriedIds: [],
        coolingDownIds: [],
        ...over,
      });
    const [last] = (await tdb.store.events.list(fleetId, { limit: 1_000 })).slice(-1);
    /** Events the watches wrote (after the setup's own). */
    const events = () => tdb.store.events.list(fleetId, { after: last?.id ?? 0 });
    const domain = async (id: string) => (await tdb.store.domains.get(id))!;
    return { fleetId, east, west, a, b, env, heartbeats, watch, polled, events, domain };
  }

  it('polls every domain once and returns at once when asked for an immediate look', async () => {
    const { watch, east, polled, heartbeats, domain } = await setup();
    const seenBefore = (await domain(east.id)).lastSeenAt;
    const o = await watch({ isImmediate: true });
    expect(o).toMatchObject({ reason: 'immediate', polls: 1, policy: expect.objectContaining(POLICY) });
    expect(o.fleet.domains.map((d) => [d.slug, d.state, d.consecutiveFailures])).toEqual([
      ['east', 'ready', 0],
      ['west', 'ready', 0],
    ]);
    expect(polled.sort()).toEqual(['east:ok', 'west:ok']);
    expect(heartbeats).toEqual([]);
    expect((await domain(east.id)).lastSeenAt).not.toBe(seenBefore);
  });

  it('keeps polling, heartbeating each round, and returns when the active misses failureThreshold polls', async () => {
    const { a, east, watch, heartbeats, events, domain } = await setup();
    a.onStatus = (_h, reads) => {
      if (reads >= 3) throw unreachable();
    };
    const o = await watch();
    expect(o.reason).toBe('decision_due');
    expect(o.polls).toBe(5); // 2 good rounds, then 3 failed ones
    expect(heartbeats).toHaveLength(4);
    expect(heartbeats[0]).toEqual({ polls: 1, observedAt: expect.any(String) });
    const failing = {
      consecutiveFailures: 3,
      state: 'ready',
      lastError: expect.stringContaining('ECONNREFUSED'),
    };
    expect(o.fleet.domains.find((d) => d.id === east.id)).toMatchObject(failing);
    expect(await domain(east.id)).toMatchObject(failing);
    // Failing the active is the workflow's decision: the activity only recorded the polls.
    expect((await events()).filter((e) => e.type === 'domain.state')).toEqual([]);
  });

  it('writes a healthy domain once per watch and refresh interval, not every poll, and decides on its latest sighting', async () => {
    const { watch, east, domain } = await setup();
    // A refresh interval (half of heartbeatStaleMs: 30 s) longer than the watch: only its first round writes.
    const o = await watch({ checkpointMs: 1_000 });
    expect(o.polls).toBeGreaterThan(2);
    const stored = (await domain(east.id)).lastSeenAt!;
    const observed = o.fleet.domains.find((d) => d.id === east.id)!.lastSeenAt!;
    expect(Date.parse(observed)).toBeGreaterThan(Date.parse(stored));
    expect(Date.parse(observed) - Date.parse(stored)).toBeGreaterThanOrEqual(500);
  });

  it('heartbeats Temporal every fifth of its heartbeat timeout, not every round', async () => {
    // A heartbeat timeout of 10 s: one heartbeat per 2 s, so a 1.5 s watch of many rounds sends its first only.
    const { watch, heartbeats } = await setup(undefined, 10_000);
    const o = await watch({ checkpointMs: 1_500 });
    expect(o.polls).toBeGreaterThan(3);
    expect(heartbeats).toEqual([{ polls: 1, observedAt: expect.any(String) }]);
  });

  it('fails a standby that missed failureThreshold polls by itself and keeps watching', async () => {
    const { b, west, watch, events, domain } = await setup();
    b.onStatus = () => {
      throw unreachable();
    };
    const o = await watch({ checkpointMs: 0 });
    expect(o.reason).toBe('checkpoint');
    const again = await watch({ checkpointMs: 0 });
    await watch({ checkpointMs: 0 });
    expect(again.polls).toBe(1);
    expect(await domain(west.id)).toMatchObject({ state: 'failed', consecutiveFailures: 3 });
    expect((await events()).map((e) => e.message)).toEqual([
      expect.stringMatching(/^domain west: ready -> failed \(consecutive_failures/),
    ]);
  });

  it('keeps a busy active ready: slow admin endpoints (state unknown, condition busy) are no failed poll', async () => {
    const { a, east, watch, domain } = await setup();
    Object.assign(a.models[0]!, { state: 'unknown', condition: 'busy', runningRequests: 64 });
    for (let round = 0; round < 4; round += 1) expect((await watch({ isImmediate: true })).reason).toBe('immediate');
    expect(await domain(east.id)).toMatchObject({ state: 'ready', consecutiveFailures: 0, lastError: null });
  });

  it('counts an answered poll whose model process is gone as failed, up to the threshold', async () => {
    const { a, east, watch, domain } = await setup();
    Object.assign(a.models[0]!, { state: 'unknown', condition: 'gone', runningRequests: null });
    const o = await watch();
    expect(o.reason).toBe('decision_due');
    expect(await domain(east.id)).toMatchObject({
      consecutiveFailures: 3,
      lastError: expect.stringMatching(/no process serves the port/),
    });
  });

  it('takes a relayed answer as proof of life for an unreachable supervisor, and fails it once they stop', async () => {
    let servedAtMs: number | null = Date.now() + 60_000;
    const { a, east, watch, domain } = await setup({ lastServedAtMs: () => servedAtMs });
    a.onStatus = () => {
      throw unreachable();
    };
    for (let round = 0; round < 4; round += 1) expect((await watch({ isImmediate: true })).reason).toBe('immediate');
    expect(await domain(east.id)).toMatchObject({ consecutiveFailures: 0, state: 'ready' });
    servedAtMs = null;
    expect((await watch()).reason).toBe('decision_due');
    expect(await domain(east.id)).toMatchObject({ consecutiveFailures: 3 });
  });

  it('hears the proxy’s announced proofs of life over Postgres NOTIFY', async () => {
    const { east } = await setup();
    const proof = createProofOfLife(tdb.store);
    expect(proof.lastServedAtMs(east.id)).toBeNull(); // starts listening
    const at = new Date();
    await eventually('the announcement heard', async () => {
      await tdb.store.domains.announceServed(east.id, at);
      return proof.lastServedAtMs(east.id) === at.getTime();
    });
  });

  it('marks the active degraded when a model falls asleep, and ready again when it wakes', async () => {
    const { a, east, watch, events, domain } = await setup();
    a.models[0]!.state = 'asleep';
    await watch({ isImmediate: true });
    expect((await domain(east.id)).state).toBe('degraded');
    a.models[0]!.state = 'awake';
    await watch({ isImmediate: true });
    expect((await domain(east.id)).state).toBe('ready');
    expect((await events()).map((e) => e.type)).toEqual(['domain.state', 'domain.state']);
  });

  it('leaves the slots of domains in an operation to that operation', async () => {
    const { fleetId, a, east, west, watch } = await setup();
    a.models[0]!.state = 'asleep';
    const { outcome } = await tdb.store.operations.create({
      fleetId,
      kind: 'promote',
      targetDomainId: west.id,
      reason: 'test',
      requestedBy: 'test',
    });
    expect(outcome).toBe('created');
    const slots = async () => (await tdb.store.slots.listByDomain(east.id)).map((s) => [s.kind, s.state]);
    const before = await slots();
    await watch({ isImmediate: true });
    expect(await slots()).toEqual(before);
  });

  it('returns at the checkpoint when nothing is due', async () => {
    const { watch } = await setup();
    expect((await watch({ checkpointMs: 30 })).reason).toBe('checkpoint');
  });

  it('ends with the cancellation (checkNow) between rounds', async () => {
    const { b, env, watch } = await setup();
    b.onStatus = (_h, reads) => reads === 3 && env.cancel('CANCELLED');
    await expect(watch()).rejects.toBeInstanceOf(CancelledFailure);
  });

  it('throws non-retryable InvalidTarget once the fleet is gone', async () => {
    const { watch } = await setup();
    const err = await watch({ fleetId: '10000000-0000-4000-8000-00000000dead' }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ApplicationFailure);
    expect(err).toMatchObject({ type: FailureType.InvalidTarget, nonRetryable: true });
  });
});
