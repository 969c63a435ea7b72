/**
 * The monitor's own look (`lookAtFleet`) against real Postgres: the sightings, state transitions and events a
 * round of polls writes, and its races with other writers of a domain's row. Supervisors are scripted hosts.
 * The watch shards that poll between looks are tested in watch-shard.int.test.ts.
 */
import { ApplicationFailure } from '@temporalio/common';
import { eq } from 'drizzle-orm';
import { testLayout } from '../db/fixtures';
import { domains as domainsTable } from '../db/schema';
import { createTestDatabase, seedLayout, type TestDatabase } from '../db/testing';
import type { Store } from '../db/store';
import { FailureType } from '../schemas/failures';
import { quietEnvironment, runIn } from '../test/support/activity-environment';
import { FakeHost, refused, routedClient, unreachable } from '../test/support/fake-host';
import { listenLocal } from '../test/support/local-server';
import { eventually } from '../test/support/eventually';
import { detectActiveFailure } from '../core/failover-detection';
import { createFleetMonitorActivities, type LookAtFleetInput } from './fleet-monitor';
import { createServedAnswers, type ServedAnswers } from './served-answers';

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
  await runIn(quietEnvironment({ attempt: 1 }), acts.lookAtFleet, { fleetId });
  expect((await tdb.store.domains.get(west!.id))!.state).toBe('provisioning');
  const moves = (await tdb.store.events.list(fleetId)).filter((e) => e.type === 'domain.state');
  expect(moves.map((e) => e.message)).not.toContainEqual(expect.stringMatching(/west: failed -> ready/));
});

describe('lookAtFleet', () => {
  const POLICY = { heartbeatIntervalMs: 1_000, heartbeatStaleMs: 60_000, failureThreshold: 3 };
  let fleets = 0;

  /** A fresh fleet (east active and serving, west a sleeping standby, both ready) and a look at it. */
  async function setup(servedAnswers?: ServedAnswers, opts: { eastServingUrl?: string } = {}) {
    const layout = testLayout({ fleet: `watch-${++fleets}`, policy: POLICY });
    if (opts.eastServingUrl) {
      const slot = layout.domains[0]!.slots[0]!;
      if (slot.kind === 'inference') slot.models[0]!.servingUrl = opts.eastServingUrl;
    }
    const { fleetId } = await seedLayout(tdb.store, layout);
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
      servedAnswers,
      metrics: {
        domainPolled: (l) => polled.push(`${l.domain}:${l.outcome}`),
        routingCommit: () => undefined,
        operationFinished: () => undefined,
        stepSucceeded: () => undefined,
        hostObserved: () => undefined,
      },
    });
    const env = quietEnvironment({ attempt: 1 });
    const look = (over: Partial<LookAtFleetInput> = {}) => runIn(env, acts.lookAtFleet, { fleetId, ...over });
    const [last] = (await tdb.store.events.list(fleetId, { limit: 1_000 })).slice(-1);
    /** Events the looks wrote (after the setup's own). */
    const events = () => tdb.store.events.list(fleetId, { after: last?.id ?? 0 });
    const domain = async (id: string) => (await tdb.store.domains.get(id))!;
    return { fleetId, east, west, a, b, env, look, polled, events, domain };
  }

  it('polls every domain once and writes each poll, so a look leaves a fresh sighting', async () => {
    const { look, east, west, polled, domain } = await setup();
    const seenBefore = [(await domain(east.id)).lastSeenAt, (await domain(west.id)).lastSeenAt];
    const o = await look();
    expect(o).toMatchObject({ reason: 'immediate', polls: 1, policy: expect.objectContaining(POLICY) });
    expect(o.fleet.domains.map((d) => [d.slug, d.state, d.consecutiveFailures])).toEqual([
      ['east', 'ready', 0],
      ['west', 'ready', 0],
    ]);
    expect(polled.sort()).toEqual(['east:ok', 'west:ok']);
    const seenAfter = [(await domain(east.id)).lastSeenAt, (await domain(west.id)).lastSeenAt];
    expect(seenAfter.map((at, i) => at !== seenBefore[i] && at !== null)).toEqual([true, true]);
    // The observation is the fleet as stored after the round, sightings included.
    expect(o.fleet.domains.map((d) => d.lastSeenAt)).toEqual(seenAfter);
  });

  it('counts failed polls, one per look, but never fails an active by staleness or a degraded grace it did not watch', async () => {
    const { a, east, look, domain } = await setup();
    // Degraded and unseen for an hour as the store tells it: a look has not watched any of that.
    await tdb.store.domains.transition(east.id, 'degraded', { lastError: 'model asleep' });
    const anHourAgo = new Date(Date.now() - 3_600_000);
    await tdb.database.db
      .update(domainsTable)
      .set({ stateChangedAt: anHourAgo, lastSeenAt: anHourAgo })
      .where(eq(domainsTable.id, east.id));
    a.onStatus = () => {
      throw unreachable();
    };
    const first = await look();
    const active = first.fleet.domains.find((d) => d.id === east.id)!;
    expect(active).toMatchObject({ state: 'degraded', consecutiveFailures: 1 });
    // Heard an hour ago, as shown; the silence held against it counts from the look's start.
    expect(active.lastSeenAt).toBe(anHourAgo.toISOString());
    expect(Date.parse(active.watchedFrom!)).toBeGreaterThanOrEqual(Date.parse(first.watchingSince!));
    expect(Date.parse(active.stateChangedAt)).toBeGreaterThanOrEqual(Date.parse(first.watchingSince!));
    expect(detectActiveFailure(active, first.policy, new Date(first.observedAt), true)).toBeNull();
    await look();
    const third = await look();
    expect(await domain(east.id)).toMatchObject({ consecutiveFailures: 3 });
    const failing = third.fleet.domains.find((d) => d.id === east.id)!;
    expect(detectActiveFailure(failing, third.policy, new Date(third.observedAt), true)).toMatchObject({
      reason: 'consecutive_failures',
    });
  });

  it('keeps a busy active ready: slow admin endpoints (state unknown, condition busy) are no failed poll', async () => {
    const { a, east, look, domain } = await setup();
    Object.assign(a.models[0]!, { state: 'unknown', condition: 'busy', runningRequests: 64 });
    for (let round = 0; round < 4; round += 1) expect((await look()).reason).toBe('immediate');
    expect(await domain(east.id)).toMatchObject({ state: 'ready', consecutiveFailures: 0, lastError: null });
  });

  it('takes a served answer as evidence of life for an unreachable supervisor, and fails it once they stop', async () => {
    let servedAtMs: number | null = Date.now() + 60_000;
    const { a, east, look, domain } = await setup({
      lastServedAnswerAtMs: () => servedAtMs,
      missedSinceServed: () => null,
    });
    a.onStatus = () => {
      throw unreachable();
    };
    for (let round = 0; round < 4; round += 1) expect((await look()).reason).toBe('immediate');
    expect(await domain(east.id)).toMatchObject({ consecutiveFailures: 0, state: 'ready' });
    servedAtMs = null;
    await look();
    expect(await domain(east.id)).toMatchObject({ consecutiveFailures: 1 });
  });

  it('counts the polls unanswered since the last answer relayed before them: a host dark under traffic fails at the threshold', async () => {
    const { a, east, look, domain } = await setup({
      lastServedAnswerAtMs: () => servedAtMs,
      missedSinceServed: () => null,
    });
    // The proxy relayed east's last answer a second before its host went dark; nothing since.
    let servedAtMs = Date.now() - 1_000;
    a.onStatus = () => {
      throw unreachable();
    };
    for (const failures of [1, 2, 3]) {
      await look();
      expect(await domain(east.id)).toMatchObject({
        consecutiveFailures: failures,
        lastSeenAt: new Date(servedAtMs).toISOString(),
      });
    }
    // An answer relayed between two polls: its host was heard; the next unanswered poll is the first since.
    servedAtMs = Date.now() - 1;
    await look();
    expect(await domain(east.id)).toMatchObject({
      consecutiveFailures: 1,
      lastSeenAt: new Date(servedAtMs).toISOString(),
    });
  });

  it('counts a frozen model whatever the proxy serves meanwhile: answers of other models are no sighting of it', async () => {
    const { a, east, look, domain } = await setup({
      lastServedAnswerAtMs: () => Date.now(),
      missedSinceServed: () => null,
    });
    Object.assign(a.models[0]!, { condition: 'frozen', processes: { pids: [4242], stoppedPids: [4242] } });
    for (const failures of [1, 2, 3]) {
      await look();
      expect(await domain(east.id)).toMatchObject({
        consecutiveFailures: failures,
        lastError: expect.stringContaining('every process stopped'),
      });
    }
  });

  it('counts a refusal confirmed by every model port as the whole threshold at once', async () => {
    const { a, east, look, domain } = await setup();
    a.onStatus = () => {
      throw refused();
    };
    await look();
    // east's model port (127.0.0.1:9) refuses too: the host is gone, no need to wait out two more intervals.
    expect(await domain(east.id)).toMatchObject({
      consecutiveFailures: POLICY.failureThreshold,
      lastError: expect.stringContaining('confirmed: the supervisor and every model port refuse connections'),
    });
  });

  it('does not ask a failed domain its refusal again: a dead host stays one refused poll per round', async () => {
    const { a, east, look, domain } = await setup();
    await tdb.store.domains.transition(east.id, 'failed');
    let asked = 0;
    a.onStatus = () => {
      asked += 1;
      throw refused();
    };
    await look();
    expect(asked).toBe(1); // the poll, and no confirming poll after it
    expect(await domain(east.id)).toMatchObject({ state: 'failed', consecutiveFailures: 1 });
  });

  it('takes a confirmed refusal over a served answer: answers relayed a moment ago do not keep a dead host alive', async () => {
    const { a, east, look, domain } = await setup({
      lastServedAnswerAtMs: () => Date.now(),
      missedSinceServed: () => null,
    });
    a.onStatus = () => {
      throw refused();
    };
    await look();
    expect(await domain(east.id)).toMatchObject({ consecutiveFailures: POLICY.failureThreshold });
  });

  it('counts a refused supervisor as one failed poll while its model port still accepts (a supervisor restart)', async () => {
    const model = await listenLocal((_req, res) => res.end());
    try {
      const { a, east, look, domain } = await setup(undefined, { eastServingUrl: `${model.url}/v1` });
      a.onStatus = () => {
        throw refused();
      };
      await look();
      expect(await domain(east.id)).toMatchObject({ consecutiveFailures: 1 });
      expect((await domain(east.id)).lastError).not.toContain('confirmed');
    } finally {
      await model.close();
    }
  });

  it('holds a poll that timed out while the watcher itself stalled against nobody, and counts one that did not', async () => {
    const { a, east, look, domain } = await setup();
    const lastSeenAt = (await domain(east.id)).lastSeenAt;
    const timedOut = () =>
      ApplicationFailure.retryable(
        `supervisor GET ${east.supervisorUrl}v1/status: timed out after 1000 ms`,
        FailureType.SupervisorUnreachable,
      );
    a.onStatus = () => {
      // This worker's event loop held for 400 ms of the poll's 1,000 ms wait (a starved or paused watcher).
      const until = performance.now() + 400;
      while (performance.now() < until);
      throw timedOut();
    };
    await look();
    expect(await domain(east.id)).toMatchObject({ consecutiveFailures: 0, state: 'ready', lastSeenAt });
    a.onStatus = () => {
      throw timedOut();
    };
    await look();
    expect(await domain(east.id)).toMatchObject({ consecutiveFailures: 1 });
  });

  it('holds a round that reaches no domain against none, with an event, until a domain is seen again', async () => {
    const { a, b, east, west, look, domain, events } = await setup();
    const silence = () => {
      throw ApplicationFailure.retryable(
        'supervisor GET /v1/status: timed out after 1000 ms',
        FailureType.SupervisorUnreachable,
      );
    };
    a.onStatus = silence;
    b.onStatus = silence;
    await look();
    await look();
    expect(await domain(east.id)).toMatchObject({ consecutiveFailures: 0, state: 'ready' });
    expect(await domain(west.id)).toMatchObject({ consecutiveFailures: 0, state: 'ready' });
    // The standby answers again: the active's silence now counts, as a dying region's would.
    b.onStatus = () => undefined;
    await look();
    expect(await domain(east.id)).toMatchObject({ consecutiveFailures: 1 });
    expect((await events()).map((e) => e.type)).toEqual(['watcher.blind', 'watcher.sight']);
  });

  it('hears the proxy’s announced served answers over Postgres NOTIFY, dated by its own clock when heard', async () => {
    const { east } = await setup();
    // The worker's clock: the proxy's `at` is 30 s behind or ahead of it (another host's clock), and must not count.
    let workerNowMs = 1_000_000;
    const served = createServedAnswers(tdb.store, undefined, () => workerNowMs);
    expect(served.lastServedAnswerAtMs(east.id)).toBeNull(); // starts listening
    await eventually('the announcement heard', async () => {
      await tdb.store.domains.announceServedAnswer(east.id, new Date(Date.now() - 30_000));
      return served.lastServedAnswerAtMs(east.id) === 1_000_000;
    });
    workerNowMs = 2_000_000;
    await eventually('the next announcement heard', async () => {
      await tdb.store.domains.announceServedAnswer(east.id, new Date(Date.now() + 30_000));
      return served.lastServedAnswerAtMs(east.id) === 2_000_000;
    });
  });

  it('marks the active degraded when a model falls asleep, and ready again when it wakes', async () => {
    const { a, east, look, events, domain } = await setup();
    a.models[0]!.state = 'asleep';
    await look();
    expect((await domain(east.id)).state).toBe('degraded');
    a.models[0]!.state = 'awake';
    await look();
    expect((await domain(east.id)).state).toBe('ready');
    expect((await events()).map((e) => e.type)).toEqual(['domain.state', 'domain.state']);
  });

  it('leaves the slots of domains in an operation to that operation', async () => {
    const { fleetId, a, east, west, look } = await setup();
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
    await look();
    expect(await slots()).toEqual(before);
  });

  it('throws non-retryable InvalidTarget once the fleet is gone', async () => {
    const { look } = await setup();
    const err = await look({ fleetId: '10000000-0000-4000-8000-00000000dead' }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ApplicationFailure);
    expect(err).toMatchObject({ type: FailureType.InvalidTarget, nonRetryable: true });
  });
});
