import { ApplicationFailure, CancelledFailure } from '@temporalio/common';
import { FailureType } from '../schemas/failures';
import { FakeHost, fakeStore, IDS, quietEnvironment, routedClient, unreachable } from './fakes';
import { createFleetMonitorActivities, type FleetObservation, type WatchFleetInput } from './fleet-monitor';

const POLICY = { heartbeatIntervalMs: 5, heartbeatStaleMs: 60_000, failureThreshold: 3 };

function setup() {
  const a = new FakeHost();
  a.models[0]!.state = 'awake';
  a.training = [{ gpuIndex: 0, state: 'idle', pids: [], startedAt: null, lastExit: null }];
  const b = new FakeHost();
  const store = fakeStore({ policy: POLICY });
  const polled: string[] = [];
  const acts = createFleetMonitorActivities({
    store,
    supervisor: routedClient({ 'http://supervisor-a/': a, 'http://supervisor-b/': b }),
    now: () => new Date(),
    metrics: { domainPolled: (l) => polled.push(`${l.domain}:${l.outcome}`), routingCommit: () => undefined },
  });
  const env = quietEnvironment({ attempt: 1 });
  const heartbeats: unknown[] = [];
  env.on('heartbeat', (d: unknown) => heartbeats.push(d));
  const watch = (over: Partial<WatchFleetInput> = {}) =>
    env.run(acts.watchFleet, {
      fleetId: IDS.fleet,
      isAutoFailoverPaused: false,
      isImmediate: false,
      checkpointMs: 60_000,
      pendingGraceMs: 10_000,
      alreadyTriedIds: [],
      coolingDownIds: [],
      ...over,
    }) as Promise<FleetObservation>;
  return { a, b, store, env, heartbeats, watch, polled };
}

describe('watchFleet', () => {
  it('polls every domain once and returns at once when asked for an immediate look', async () => {
    const { watch, store, polled, heartbeats } = setup();
    const o = await watch({ isImmediate: true });
    expect(o).toMatchObject({ reason: 'immediate', polls: 1, policy: expect.objectContaining(POLICY) });
    expect(o.fleet.domains.map((d) => [d.slug, d.state, d.consecutiveFailures])).toEqual([
      ['east', 'ready', 0],
      ['west', 'ready', 0],
    ]);
    expect(polled.sort()).toEqual(['east:ok', 'west:ok']);
    expect(heartbeats).toEqual([]);
    expect(store.state.fleet.domains[0]!.lastSeenAt).not.toBe('2030-01-01T00:00:00.000Z');
  });

  it('keeps polling, heartbeating each round, and returns when the active misses failureThreshold polls', async () => {
    const { a, watch, heartbeats, store } = setup();
    a.onStatus = (_h, reads) => {
      if (reads >= 3) throw unreachable();
    };
    const o = await watch();
    expect(o.reason).toBe('decision_due');
    expect(o.polls).toBe(5); // 2 good rounds, then 3 failed ones
    expect(heartbeats).toHaveLength(4);
    expect(heartbeats[0]).toEqual({ polls: 1, observedAt: expect.any(String) });
    const active = o.fleet.domains.find((d) => d.id === IDS.a)!;
    expect(active).toMatchObject({
      consecutiveFailures: 3,
      state: 'ready',
      lastError: expect.stringContaining('ECONNREFUSED'),
    });
    // Failing the active is the workflow's decision: the activity only recorded the polls.
    expect(store.state.events.filter((e) => e.type === 'domain.state')).toEqual([]);
  });

  it('fails a standby that missed failureThreshold polls by itself and keeps watching', async () => {
    const { b, watch, store } = setup();
    b.onStatus = () => {
      throw unreachable();
    };
    const o = await watch({ checkpointMs: 0 });
    expect(o.reason).toBe('checkpoint');
    const again = await watch({ checkpointMs: 0 });
    await watch({ checkpointMs: 0 });
    expect(again.polls).toBe(1);
    expect(store.state.fleet.domains[1]).toMatchObject({ state: 'failed', consecutiveFailures: 3 });
    expect(store.state.events.map((e) => e.message)).toEqual([
      expect.stringMatching(/^domain west: ready -> failed \(consecutive_failures/),
    ]);
  });

  it('marks the active degraded when a model falls asleep, and ready again when it wakes', async () => {
    const { a, watch, store } = setup();
    a.models[0]!.state = 'asleep';
    await watch({ isImmediate: true });
    expect(store.state.fleet.domains[0]!.state).toBe('degraded');
    a.models[0]!.state = 'awake';
    await watch({ isImmediate: true });
    expect(store.state.fleet.domains[0]!.state).toBe('ready');
    expect(store.state.events.map((e) => e.type)).toEqual(['domain.state', 'domain.state']);
  });

  it('leaves the slots of domains in an operation to that operation', async () => {
    const { a, watch, store } = setup();
    a.models[0]!.state = 'asleep';
    store.state.fleet.inFlightOperation = {
      id: '10000000-0000-4000-8000-0000000000f1',
      fleetId: IDS.fleet,
      kind: 'promote',
      targetDomainId: IDS.b,
      fromDomainId: IDS.a,
      state: 'running',
      step: 'wakeModels',
      reason: 'test',
      requestedBy: 'test',
      workflowId: 'w',
      routingCommitted: false,
      routeRevision: null,
      error: null,
      createdAt: '2030-01-01T00:00:00.000Z',
      startedAt: null,
      finishedAt: null,
    };
    await watch({ isImmediate: true });
    expect(store.slotMoves).toEqual([]);
  });

  it('returns at the checkpoint when nothing is due', async () => {
    const { watch } = setup();
    expect((await watch({ checkpointMs: 30 })).reason).toBe('checkpoint');
  });

  it('ends with the cancellation (checkNow) between rounds', async () => {
    const { b, env, watch } = setup();
    b.onStatus = (_h, reads) => reads === 3 && env.cancel('CANCELLED');
    await expect(watch()).rejects.toBeInstanceOf(CancelledFailure);
  });

  it('throws non-retryable InvalidTarget once the fleet is gone', async () => {
    const { watch } = setup();
    const err = await watch({ fleetId: '10000000-0000-4000-8000-00000000dead' }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ApplicationFailure);
    expect(err).toMatchObject({ type: FailureType.InvalidTarget, nonRetryable: true });
  });
});
