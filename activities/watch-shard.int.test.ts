/**
 * A watch shard (`watchShard`) against real Postgres: which fleets it polls and how often, what it writes, what
 * it signals the fleets' monitors and when, and how it heartbeats and ends. Supervisors are scripted hosts;
 * the signals are recorded as the worker would send them.
 */
import { CancelledFailure } from '@temporalio/common';
import { eq } from 'drizzle-orm';
import { testLayout } from '../db/fixtures';
import { domains as domainsTable } from '../db/schema';
import { createTestDatabase, seedLayout, type TestDatabase } from '../db/testing';
import type { Store } from '../db/store';
import type { FleetObservation } from '../core/fleet-observation';
import type { SlotState } from '../schemas/enums';
import type { SupervisorClient } from './supervisor-client';
import { quietEnvironment, runIn } from '../test/support/activity-environment';
import { eventually } from '../test/support/eventually';
import { FakeHost, routedClient, unreachable } from '../test/support/fake-host';
import { createFleetMonitorActivities, type WatchShardInput } from './fleet-monitor';
import { HAND_ON_SPACING_MS } from './watch-hub';
import type { WatchPeers } from './watch-peers';

const POLICY = { heartbeatIntervalMs: 20, heartbeatStaleMs: 60_000, failureThreshold: 3 };

let tdb: TestDatabase;
beforeEach(async () => {
  tdb = await createTestDatabase();
});
afterEach(() => tdb?.drop());

/** A fleet of the test database: east active and serving, west a sleeping standby, both ready, hosts scripted. */
interface TestFleet {
  fleetId: string;
  slug: string;
  eastId: string;
  westId: string;
  east: FakeHost;
  west: FakeHost;
}

/**
 * Seeds a fleet whose supervisors are hosts of its own (URLs named after the fleet, answering before the fleet
 * is in the store), its slots as a first look would have left them: nothing to repair.
 */
async function seedFleet(slug: string, policy: object = POLICY): Promise<TestFleet> {
  const layout = testLayout({ fleet: slug, policy });
  for (const d of layout.domains) d.supervisorUrl = `${d.supervisorUrl}${slug}/`;
  const east = new FakeHost();
  east.models[0]!.name = 'm-shared';
  east.models[0]!.state = 'awake';
  east.training = [{ gpuIndex: 0, state: 'idle', pids: [], startedAt: null, lastExit: null }];
  const west = new FakeHost();
  west.models[0]!.name = 'm-shared';
  hostsByUrl[layout.domains[0]!.supervisorUrl] = east;
  hostsByUrl[layout.domains[1]!.supervisorUrl] = west;
  const { fleetId } = await seedLayout(tdb.store, layout);
  const snapshot = (await tdb.store.fleets.snapshot(fleetId))!;
  const [eastRow, westRow] = snapshot.domains;
  const atRest = {
    east: { inference: 'serving', training: 'idle' },
    west: { inference: 'sleeping', training: 'training' },
  };
  for (const d of snapshot.domains) {
    for (const slot of d.slots) {
      const to = atRest[d.slug as 'east' | 'west'][slot.kind] as SlotState;
      if (slot.state !== to) await tdb.store.slots.transition(slot.id, to);
    }
    await tdb.store.domains.transition(d.id, 'ready');
  }
  return { fleetId, slug, eastId: eastRow!.id, westId: westRow!.id, east, west };
}
let hostsByUrl: Record<string, FakeHost> = {};
beforeEach(() => void (hostsByUrl = {}));

/** A worker's monitor activities over the test database, counting polls per fleet and recording signals. */
function worker(
  opts: {
    shards?: number;
    heartbeatTimeoutMs?: number;
    store?: Store;
    supervisor?: SupervisorClient;
    peers?: WatchPeers;
  } = {},
) {
  const polls = new Map<string, number>();
  const signals: { fleetId: string; observation: FleetObservation }[] = [];
  const acts = createFleetMonitorActivities({
    store: opts.store ?? tdb.store,
    supervisor: opts.supervisor ?? routedClient(hostsByUrl),
    now: () => new Date(),
    watchShards: opts.shards ?? 1,
    watchPeers: opts.peers,
    observeFleet: async (fleetId, observation) => void signals.push({ fleetId, observation }),
    metrics: {
      domainPolled: (l) => polls.set(l.fleet, (polls.get(l.fleet) ?? 0) + 1),
      routingCommit: () => undefined,
      operationFinished: () => undefined,
      stepSucceeded: () => undefined,
      hostObserved: () => undefined,
    },
  });
  const env = quietEnvironment({ attempt: 1, heartbeatTimeoutMs: opts.heartbeatTimeoutMs ?? 5_000 });
  const heartbeats: unknown[] = [];
  env.on('heartbeat', (d: unknown) => heartbeats.push(d));
  // A fleet's first routine signal comes at a point of its checkpoint taken from a 32-bit hash of its (random)
  // id (`firstSignalBase`): with a checkpoint of 2^33 ms that point is at least 2^32 ms (50 days) away, so only
  // what is due is signalled, unless a test asks for the checkpoint. (Ten minutes let one id in ~1,500 signal
  // within a test's watch.)
  const watch = (over: Partial<WatchShardInput> = {}) =>
    runIn(env, acts.watchShard, {
      shard: 0,
      shards: opts.shards ?? 1,
      checkpointMs: 500,
      fleetCheckpointMs: 2 ** 33,
      ...over,
    });
  const signalsOf = (fleetId: string) => signals.filter((s) => s.fleetId === fleetId).map((s) => s.observation);
  return { acts, env, watch, polls, signals, signalsOf, heartbeats };
}

const domainRow = async (id: string) => (await tdb.store.domains.get(id))!;

it('polls every fleet of its shard at its interval, writes a healthy domain once, and signals nothing while nothing is due', async () => {
  const f1 = await seedFleet('quiet-1');
  const f2 = await seedFleet('quiet-2');
  const w = worker();
  const startedAt = Date.now();
  const result = await w.watch({ checkpointMs: 600 });
  const elapsedMs = Date.now() - startedAt;
  expect(result).toMatchObject({ retired: false, fleets: 2, signalled: 0 });
  // Two domains per fleet, a poll each per 20 ms interval: a healthy shard keeps every fleet's pace.
  for (const f of [f1, f2]) expect(w.polls.get(f.slug)).toBeGreaterThanOrEqual(2 * Math.floor(elapsedMs / 20 / 3));
  expect(w.signals).toEqual([]);
  // The first round writes every poll; the refresh interval (half of heartbeatStaleMs: 30 s) is not reached.
  const firstSighting = (await domainRow(f1.eastId)).lastSeenAt!;
  expect(Date.parse(firstSighting) - startedAt).toBeLessThan(elapsedMs / 2);
  expect(Date.parse(result.observedAt) - Date.parse(firstSighting)).toBeGreaterThanOrEqual(300);
});

it('refreshes a healthy domain’s stored sighting once per refresh interval, not at every poll', async () => {
  // heartbeatStaleMs 200: a sighting is written again once 100 ms old (lastSeenRefreshMs), polls come every 20 ms.
  const fleet = await seedFleet('refresh', { ...POLICY, heartbeatStaleMs: 200 });
  const writes: string[] = [];
  const store: Store = {
    ...tdb.store,
    domains: {
      ...tdb.store.domains,
      recordPolls: (polls) => (writes.push(...polls.map((p) => p.domainId)), tdb.store.domains.recordPolls(polls)),
    },
  };
  const w = worker({ store });
  const result = await w.watch({ checkpointMs: 800 });
  const eastWrites = writes.filter((id) => id === fleet.eastId).length;
  const eastPolls = w.polls.get('refresh')! / 2;
  expect(eastWrites).toBeGreaterThanOrEqual(4);
  expect(eastWrites).toBeLessThan(eastPolls / 2);
  // The store's sighting is never older than the refresh interval and a round or two.
  const stored = Date.parse((await domainRow(fleet.eastId)).lastSeenAt!);
  expect(Date.parse(result.observedAt) - stored).toBeLessThan(200);
});

it('reads a fleet again only when its stored picture changed, not when its polls refresh sightings', async () => {
  const fleet = await seedFleet('reads');
  const sent: number[] = [];
  const store: Store = {
    ...tdb.store,
    fleets: {
      ...tdb.store.fleets,
      async watchShards(input) {
        const rows = await tdb.store.fleets.watchShards(input);
        sent.push(rows.filter((r) => r.snapshot !== null).length);
        return rows;
      },
    },
  };
  const w = worker({ store });
  const watching = w.watch({ checkpointMs: 800 });
  await eventually('a few rounds', async () => (w.polls.get(fleet.slug) ?? 0) >= 10, 10_000, 10);
  // An operator pauses automatic failover: a change of the stored picture, sent once.
  await tdb.store.fleets.setAutoFailoverPause(fleet.fleetId, { paused: true, by: 'test' });
  await watching;
  expect(sent.length).toBeGreaterThan(10);
  expect(sent.filter((n) => n > 0)).toEqual([1, 1]);
});

it('signals the monitor once when the active misses failureThreshold polls, with the fleet as stored then', async () => {
  const failing = await seedFleet('failing');
  const healthy = await seedFleet('healthy');
  failing.east.onStatus = (_h, reads) => {
    if (reads >= 3) throw unreachable();
  };
  const w = worker();
  const result = await w.watch({ checkpointMs: 700 });
  const [observation, ...again] = w.signalsOf(failing.fleetId);
  // Not signalled again within the hold-off (max(5 s, 25 polls)) while what is due stays the same.
  expect(again).toEqual([]);
  expect(observation).toMatchObject({ reason: 'decision_due', policy: expect.objectContaining(POLICY) });
  expect(observation!.polls).toBeGreaterThanOrEqual(5); // 2 good rounds, then 3 failed ones
  const east = observation!.fleet.domains.find((d) => d.id === failing.eastId)!;
  expect(east).toMatchObject({ state: 'ready', lastError: expect.stringContaining('EHOSTUNREACH') });
  expect(east.consecutiveFailures).toBeGreaterThanOrEqual(3);
  expect(w.signalsOf(healthy.fleetId)).toEqual([]);
  expect(result.signalled).toBe(1);
  // Failing the active is the workflow's decision: the shard only recorded the polls.
  expect((await domainRow(failing.eastId)).state).toBe('ready');
});

it('signals again at once when what is due changes (a pause stored meanwhile)', async () => {
  const fleet = await seedFleet('changes');
  fleet.east.onStatus = () => {
    throw unreachable();
  };
  const w = worker();
  const watching = w.watch({ checkpointMs: 900 });
  const first = await eventually('the first signal', async () => w.signalsOf(fleet.fleetId)[0], 10_000, 10);
  await tdb.store.fleets.setAutoFailoverPause(fleet.fleetId, { paused: true, by: 'test' });
  await watching;
  const [, second, ...more] = w.signalsOf(fleet.fleetId);
  expect(more).toEqual([]);
  expect(first.autoFailoverPause).toBeNull();
  expect(second).toMatchObject({ reason: 'decision_due', autoFailoverPause: { by: 'test' } });
});

it('counts an answered poll whose model process is gone as failed, and signals at the threshold', async () => {
  const fleet = await seedFleet('gone');
  Object.assign(fleet.east.models[0]!, { state: 'unknown', condition: 'gone', runningRequests: null });
  const w = worker();
  await w.watch({ checkpointMs: 400 });
  expect(w.signalsOf(fleet.fleetId)).toHaveLength(1);
  expect(await domainRow(fleet.eastId)).toMatchObject({
    lastError: expect.stringMatching(/no process serves the port/),
  });
});

it('signals each monitor at its checkpoint while nothing is due, spread over the checkpoint', async () => {
  const fleets = [await seedFleet('routine-1'), await seedFleet('routine-2'), await seedFleet('routine-3')];
  const w = worker();
  await w.watch({ checkpointMs: 1_000, fleetCheckpointMs: 300 });
  for (const f of fleets) {
    const routine = w.signalsOf(f.fleetId);
    expect(routine.length).toBeGreaterThanOrEqual(2);
    expect(routine.every((o) => o.reason === 'checkpoint')).toBe(true);
    const gaps = routine.slice(1).map((o, i) => Date.parse(o.observedAt) - Date.parse(routine[i]!.observedAt));
    for (const gap of gaps) expect(gap).toBeGreaterThanOrEqual(300);
  }
});

it('keeps a fleet’s pace while another fleet’s supervisor answers late', async () => {
  const slow = await seedFleet('slow');
  const fast = await seedFleet('fast');
  const routed = routedClient(hostsByUrl);
  const slowUrls = new Set(Object.keys(hostsByUrl).filter((url) => url.includes('/slow/')));
  let slowAsked = 0;
  const supervisor: SupervisorClient = {
    ...routed,
    async status(target, opts) {
      if (slowUrls.has(target.supervisorUrl)) {
        slowAsked += 1;
        await new Promise((resolve) => setTimeout(resolve, 400));
      }
      return routed.status(target, opts);
    },
  };
  let reads = 0;
  const store: Store = {
    ...tdb.store,
    fleets: { ...tdb.store.fleets, watchShards: (input) => (reads++, tdb.store.fleets.watchShards(input)) },
  };
  const w = worker({ supervisor, store });
  const startedAt = Date.now();
  await w.watch({ checkpointMs: 1_000 });
  const elapsedMs = Date.now() - startedAt;
  // Each slow supervisor asked once per answer: a round waits on the request under way, never asks twice at once.
  expect(slowAsked).toBeLessThanOrEqual(2 * Math.ceil(elapsedMs / 400));
  // Polled at its own 20 ms pace (a third of it on a loaded machine), not at the slow fleet's 400 ms.
  expect(w.polls.get(fast.slug)).toBeGreaterThan(2 * Math.ceil(elapsedMs / 400) * 3);
  // Two fleets out of step still share one read per interval, at most.
  expect(reads).toBeLessThanOrEqual(Math.ceil(elapsedMs / 20) + 2);
  expect(w.signals).toEqual([]);
  expect((await domainRow(slow.eastId)).consecutiveFailures).toBe(0);
});

it('starts a fleet’s next round only once its last one is recorded, however slow the store', async () => {
  const fleet = await seedFleet('slow-store');
  await seedFleet('fast-beside');
  // Every poll of one fleet written (a failing standby) and answered now late, now soon (12 ms, 2 ms, ...: within
  // the 20 ms interval's wait), so one round comes back while the last is being written; each write takes 100 ms.
  fleet.west.onStatus = () => {
    throw unreachable();
  };
  const routed = routedClient(hostsByUrl);
  let reads = 0;
  const supervisor: SupervisorClient = {
    ...routed,
    async status(target, opts) {
      if (target.supervisorUrl.includes('/slow-store/')) {
        const delayMs = Math.floor(reads++ / 2) % 2 === 0 ? 12 : 2;
        await new Promise((resolve) => setTimeout(resolve, delayMs));
      }
      return routed.status(target, opts);
    },
  };
  const recorded: string[][] = [];
  const store: Store = {
    ...tdb.store,
    domains: {
      ...tdb.store.domains,
      async recordPolls(polls) {
        recorded.push(polls.map((p) => p.domainId));
        await new Promise((resolve) => setTimeout(resolve, 100));
        return tdb.store.domains.recordPolls(polls);
      },
    },
  };
  const w = worker({ store, supervisor });
  await w.watch({ checkpointMs: 800 });
  const westWrites = recorded.filter((ids) => ids.includes(fleet.westId)).length;
  expect(westWrites).toBeGreaterThan(2);
  for (const ids of recorded) expect(new Set(ids).size).toBe(ids.length);
  // Every write counted once: the last may still be landing as the watch returns.
  await eventually(
    'the last write to land',
    async () => (await domainRow(fleet.westId)).consecutiveFailures === westWrites,
    10_000,
    10,
  );
  expect(await domainRow(fleet.westId)).toMatchObject({ state: 'failed', consecutiveFailures: westWrites });
});

it('fails a standby that missed failureThreshold polls by itself and keeps watching', async () => {
  const fleet = await seedFleet('standby');
  fleet.west.onStatus = () => {
    throw unreachable();
  };
  const w = worker();
  await w.watch({ checkpointMs: 400 });
  expect(await domainRow(fleet.westId)).toMatchObject({ state: 'failed' });
  const moves = (await tdb.store.events.list(fleet.fleetId)).filter((e) => e.type === 'domain.state');
  expect(moves.map((e) => e.message)).toEqual([
    expect.stringMatching(/^domain west: ready -> failed \(consecutive_failures/),
  ]);
  expect(w.signalsOf(fleet.fleetId)).toEqual([]);
});

it('heartbeats Temporal two fifths of its heartbeat timeout apart, not every round', async () => {
  await seedFleet('heartbeats');
  // A heartbeat timeout of 5 s: one heartbeat per 2 s, so a watch of many rounds in 1.5 s sends its first only.
  const w = worker({ heartbeatTimeoutMs: 5_000 });
  const result = await w.watch({ checkpointMs: 1_500 });
  expect(result.rounds).toBeGreaterThan(3);
  expect(w.heartbeats).toEqual([
    { fleets: expect.any(Number), rounds: expect.any(Number), signalled: 0, observedAt: expect.any(String) },
  ]);
});

it('deals the fleets over the shards: every fleet is polled by exactly one of them', async () => {
  const fleets = [];
  for (let i = 0; i < 8; i += 1) fleets.push(await seedFleet(`dealt-${i}`));
  const w = worker({ shards: 3 });
  const polledBy = new Map<string, number[]>();
  for (let shard = 0; shard < 3; shard += 1) {
    w.polls.clear();
    await w.watch({ shard, checkpointMs: 100 });
    for (const slug of w.polls.keys()) polledBy.set(slug, [...(polledBy.get(slug) ?? []), shard]);
  }
  expect([...polledBy.keys()].sort()).toEqual(fleets.map((f) => f.slug).sort());
  for (const shards of polledBy.values()) expect(shards).toHaveLength(1);
  expect(new Set([...polledBy.values()].flat()).size).toBeGreaterThan(1);
});

it('serves every shard a worker holds with one read and at most one write a round', async () => {
  const fleets = [];
  for (let i = 0; i < 6; i += 1) fleets.push(await seedFleet(`hub-${i}`));
  const reads: number[][] = [];
  const store: Store = {
    ...tdb.store,
    fleets: {
      ...tdb.store.fleets,
      async watchShards(input) {
        reads.push([...input.of].sort());
        return tdb.store.fleets.watchShards(input);
      },
    },
  };
  const w = worker({ store, shards: 3 });
  const startedAt = Date.now();
  await Promise.all([0, 1, 2].map((shard) => w.watch({ shard, checkpointMs: 800 })));
  const elapsedMs = Date.now() - startedAt;
  for (const f of fleets) expect(w.polls.get(f.slug)).toBeGreaterThan(4);
  // Once every shard has joined, each read covers all three; one a round (20 ms apart), not one per shard.
  const full = reads.filter((of) => of.join() === '0,1,2');
  expect(full.length).toBeGreaterThan(reads.length / 2);
  expect(reads.length).toBeLessThanOrEqual(Math.ceil(elapsedMs / 20) + 4);
});

it('hands its highest shard on while it holds more than its share and another worker less, one at a time', async () => {
  for (let i = 0; i < 4; i += 1) await seedFleet(`handed-back-${i}`);
  const held: number[] = [];
  const peers: WatchPeers = { hold: (n) => void held.push(n), others: () => [{ held: 0, ownQueue: 'q/other' }] };
  const w = worker({ shards: 4, peers });
  const watched = await Promise.all(
    [0, 1, 2, 3].map(async (shard) => {
      const result = await w.watch({ shard, checkpointMs: 3_000 });
      return { shard, handTo: result.handTo ?? null, atMs: Date.now() };
    }),
  );
  // Four held, share two of four: shard 3 goes first, then shard 2 (the highest left) a spacing later; then at
  // its share the worker keeps 0 and 1 until their checkpoint.
  expect(watched.map((r) => r.handTo)).toEqual([null, null, 'q/other', 'q/other']);
  expect(watched[2]!.atMs - watched[3]!.atMs).toBeGreaterThanOrEqual(HAND_ON_SPACING_MS - 50);
  expect(held.slice(0, 6)).toEqual([1, 2, 3, 4, 3, 2]);
  // Every fleet was polled here: a shard is handed on only once the hub has looked at its fleets.
  expect(w.polls.size).toBe(4);
});

it('keeps every shard it holds at its share, and all of them without peers', async () => {
  await seedFleet('kept');
  const atShare = worker({
    shards: 2,
    peers: { hold: () => undefined, others: () => [{ held: 1, ownQueue: 'q/other' }] },
  });
  const alone = worker({ shards: 2 });
  for (const w of [atShare, alone]) {
    const results = await Promise.all([0, 1].map((shard) => w.watch({ shard, checkpointMs: 600 })));
    expect(results.map((r) => r.handTo ?? null)).toEqual([null, null]);
  }
});

it('retires at once when started for another number of shards than this worker deals', async () => {
  await seedFleet('retired');
  const w = worker({ shards: 8 });
  expect(await w.watch({ shards: 4 })).toMatchObject({ retired: true, fleets: 0, rounds: 0 });
  expect(w.polls.size).toBe(0);
});

it('watches a fleet added to the store from its next read', async () => {
  const kept = await seedFleet('kept');
  const w = worker();
  const watching = w.watch({ checkpointMs: 800 });
  await eventually('the first poll', async () => w.polls.get(kept.slug), 10_000, 10);
  const added = await seedFleet('added');
  await watching;
  expect(w.polls.get(added.slug)).toBeGreaterThan(2);
  expect(w.signals).toEqual([]);
});

it('times the degraded grace from continuous watching, not from a degradation recorded before an outage', async () => {
  const fleet = await seedFleet('degraded-grace', { ...POLICY, degradedGraceMs: 30_000 });
  // The active has been degraded for an hour as the store tells it (one of its models asleep).
  fleet.east.models[0]!.state = 'asleep';
  await tdb.store.domains.transition(fleet.eastId, 'degraded', { lastError: 'model asleep' });
  const anHourAgo = new Date(Date.now() - 3_600_000);
  await tdb.database.db
    .update(domainsTable)
    .set({ stateChangedAt: anHourAgo })
    .where(eq(domainsTable.id, fleet.eastId));
  const twoHoursAgo = new Date(Date.now() - 7_200_000).toISOString();
  // The first watch after an outage (its last look an hour ago): no failover until the grace is watched.
  const resumed = worker();
  const result = await resumed.watch({ watchingSince: twoHoursAgo, lookedUntil: anHourAgo.toISOString() });
  expect(resumed.signals).toEqual([]);
  expect(Date.parse(result.watchingSince!)).toBeGreaterThan(Date.now() - 60_000);
  // Watches that followed one another since before the degradation: the 30 s grace has long run out.
  const followsOn = worker();
  await followsOn.watch({ watchingSince: twoHoursAgo, lookedUntil: new Date().toISOString() });
  const [due] = followsOn.signalsOf(fleet.fleetId);
  expect(due).toMatchObject({ reason: 'decision_due', watchingSince: twoHoursAgo });
  expect(due!.fleet.domains.find((d) => d.id === fleet.eastId)).toMatchObject({ state: 'degraded' });
});

it('ends with its cancellation', async () => {
  const fleet = await seedFleet('cancelled');
  const w = worker();
  fleet.west.onStatus = (_h, reads) => reads === 3 && w.env.cancel('CANCELLED');
  await expect(w.watch({ checkpointMs: 60_000 })).rejects.toBeInstanceOf(CancelledFailure);
});
