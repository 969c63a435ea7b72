import { ApplicationFailure } from '@temporalio/common';
import postgres from 'postgres';
import { testLayout } from '../db/fixtures';
import { createTestDatabase, seedLayout, type TestDatabase } from '../db/testing';
import { FailureType } from '../schemas/failures';
import { createFleetStoreActivities } from './fleet-store';
import { quietEnvironment, runIn } from '../test/support/activity-environment';
import { FakeHost } from '../test/support/fake-host';

let tdb: TestDatabase;
let acts: ReturnType<typeof createFleetStoreActivities>;
const commits: string[] = [];

beforeAll(async () => {
  tdb = await createTestDatabase();
  acts = createFleetStoreActivities({
    store: tdb.store,
    supervisor: new FakeHost().client,
    now: () => new Date(),
    metrics: {
      domainPolled: () => undefined,
      routingCommit: (l) => commits.push(l.outcome),
      operationFinished: () => undefined,
      stepSucceeded: () => undefined,
      hostObserved: () => undefined,
    },
  });
});
afterAll(() => tdb?.drop());

let fleetSlug = 0;
/** A fresh fleet (active east, standby west) and a promotion of west requested by a test. */
async function fleetWithPromotion(kind: 'promote' | 'demote' = 'promote') {
  const report = await seedLayout(tdb.store, testLayout({ fleet: `f${++fleetSlug}` }));
  const snapshot = (await tdb.store.fleets.snapshot(report.fleetId))!;
  const [east, west] = snapshot.domains;
  const { operation } = await tdb.store.operations.create({
    fleetId: snapshot.id,
    kind,
    targetDomainId: west!.id,
    reason: 'test',
    requestedBy: 'test',
  });
  return { fleetId: snapshot.id, east: east!, west: west!, operation };
}

// eslint-disable-next-line @typescript-eslint/no-explicit-any
const run = <F extends (...args: any[]) => Promise<unknown>>(fn: F, ...args: Parameters<F>) =>
  runIn(quietEnvironment({ attempt: 1 }), fn, ...args);
const failureOf = async (p: Promise<unknown>) => {
  const err = await p.then(
    () => null,
    (e: unknown) => e,
  );
  expect(err).toBeInstanceOf(ApplicationFailure);
  return err as ApplicationFailure;
};

describe('beginOperation', () => {
  it('starts the operation and returns the policy, the old active and the target', async () => {
    const { fleetId, east, west, operation } = await fleetWithPromotion();
    const begin = await run(acts.beginOperation, {
      fleetId,
      operationId: operation.id,
      kind: 'promote',
      targetDomainId: west.id,
    });
    expect(begin).toMatchObject({
      state: 'running',
      isRoutingCommitted: false,
      fromDomainId: east.id,
      target: { id: west.id, slug: 'west', isActive: false, inferenceSlotCount: 1, trainingSlotCount: 1 },
    });
    expect(begin.policy.failureThreshold).toBe(3);
    expect((await tdb.store.operations.get(operation.id))?.state).toBe('running');
    const events = await tdb.store.events.list(fleetId);
    expect(events.map((e) => e.type)).toContain('operation.started');
  });

  it('is idempotent for a running operation', async () => {
    const { fleetId, west, operation } = await fleetWithPromotion();
    const input = { fleetId, operationId: operation.id, kind: 'promote' as const, targetDomainId: west.id };
    await run(acts.beginOperation, input);
    expect((await run(acts.beginOperation, input)).state).toBe('running');
  });

  it('returns a finished operation as it is, validating nothing', async () => {
    const { fleetId, west, operation } = await fleetWithPromotion();
    await tdb.store.operations.start(operation.id);
    await tdb.store.operations.fail(operation.id, { step: 'x', code: 'y', message: 'z' });
    expect(
      (
        await run(acts.beginOperation, {
          fleetId,
          operationId: operation.id,
          kind: 'promote',
          targetDomainId: west.id,
        })
      ).state,
    ).toBe('failed');
  });

  it('refuses to promote the active domain (non-retryable InvalidTarget)', async () => {
    const { fleetId, east, operation } = await fleetWithPromotion();
    const f = await failureOf(
      run(acts.beginOperation, { fleetId, operationId: operation.id, kind: 'promote', targetDomainId: east.id }),
    );
    expect(f).toMatchObject({ type: FailureType.InvalidTarget, nonRetryable: true });
    expect(f.message).toBe(`domain east is the active domain of fleet ${`f${fleetSlug}`}`);
  });

  it('refuses a domain of another fleet', async () => {
    const { fleetId, operation } = await fleetWithPromotion();
    const other = await fleetWithPromotion();
    const f = await failureOf(
      run(acts.beginOperation, {
        fleetId,
        operationId: operation.id,
        kind: 'promote',
        targetDomainId: other.west.id,
      }),
    );
    expect(f.type).toBe(FailureType.InvalidTarget);
  });

  it('refuses an operation that does not exist (OperationClosed)', async () => {
    const { fleetId, west } = await fleetWithPromotion();
    const f = await failureOf(
      run(acts.beginOperation, {
        fleetId,
        operationId: '20000000-0000-4000-8000-000000000000',
        kind: 'promote',
        targetDomainId: west.id,
      }),
    );
    expect(f.type).toBe(FailureType.OperationClosed);
  });
});

describe('recordStep', () => {
  it('sets the current step and appends an event', async () => {
    const { fleetId, west, operation } = await fleetWithPromotion();
    await tdb.store.operations.start(operation.id);
    await run(acts.recordStep, {
      fleetId,
      operationId: operation.id,
      domainId: west.id,
      step: 'wakeModels',
      status: 'started',
      message: 'wakeModels started',
    });
    expect((await tdb.store.operations.get(operation.id))?.step).toBe('wakeModels');
    const [last] = (await tdb.store.events.list(fleetId)).slice(-1);
    expect(last).toMatchObject({
      type: 'operation.step',
      message: 'wakeModels started',
      data: { step: 'wakeModels', status: 'started' },
    });
  });

  it('refuses to start a step on an operation that is no longer in flight', async () => {
    const { fleetId, west, operation } = await fleetWithPromotion();
    await tdb.store.operations.cancel(operation.id, { step: 'x', code: 'Aborted', message: 'stop' });
    const f = await failureOf(
      run(acts.recordStep, {
        fleetId,
        operationId: operation.id,
        domainId: west.id,
        step: 'wakeModels',
        status: 'started',
        message: 'm',
      }),
    );
    expect(f).toMatchObject({ type: FailureType.OperationClosed, nonRetryable: true });
  });
});

describe('readRoutingOutcome', () => {
  it('says whether the operation moved routing, and at which revision', async () => {
    const { fleetId, east, west, operation } = await fleetWithPromotion();
    await tdb.store.operations.start(operation.id);
    const read = () => run(acts.readRoutingOutcome, { fleetId, operationId: operation.id });
    expect(await read()).toEqual({ isRoutingCommitted: false, routeRevision: null });
    const commit = { fleetId, operationId: operation.id, expectedActiveDomainId: east.id, targetDomainId: west.id };
    const { routeRevision } = await run(acts.commitRouting, commit);
    expect(await read()).toEqual({ isRoutingCommitted: true, routeRevision });
  });

  it('answers OperationClosed for an operation of another fleet or none', async () => {
    const { operation } = await fleetWithPromotion();
    const other = await fleetWithPromotion();
    const f = await failureOf(run(acts.readRoutingOutcome, { fleetId: other.fleetId, operationId: operation.id }));
    expect(f).toMatchObject({ type: FailureType.OperationClosed, nonRetryable: true });
  });
});

describe('commitRouting', () => {
  it('moves the pointer once; a repeat is a no-op returning the same revision', async () => {
    const { fleetId, east, west, operation } = await fleetWithPromotion();
    await tdb.store.operations.start(operation.id);
    const input = { fleetId, operationId: operation.id, expectedActiveDomainId: east.id, targetDomainId: west.id };
    const first = await run(acts.commitRouting, input);
    const second = await run(acts.commitRouting, input);
    expect(first.outcome).toBe('committed');
    expect(second).toEqual({ outcome: 'already_committed', routeRevision: first.routeRevision });
    const fleet = (await tdb.store.fleets.snapshot(fleetId))!;
    expect(fleet).toMatchObject({ activeDomainId: west.id, routeRevision: first.routeRevision });
    expect(commits.slice(-2)).toEqual(['committed', 'already_committed']);
    expect((await tdb.store.events.list(fleetId)).filter((e) => e.type === 'routing.committed')).toHaveLength(1);
  });

  it('fails non-retryably with RouteConflict when the pointer moved, changing nothing', async () => {
    const { fleetId, west, operation } = await fleetWithPromotion();
    await tdb.store.operations.start(operation.id);
    const before = (await tdb.store.fleets.snapshot(fleetId))!;
    const f = await failureOf(
      run(acts.commitRouting, {
        fleetId,
        operationId: operation.id,
        expectedActiveDomainId: west.id,
        targetDomainId: west.id,
      }),
    );
    expect(f).toMatchObject({ type: FailureType.RouteConflict, nonRetryable: true });
    const after = (await tdb.store.fleets.snapshot(fleetId))!;
    expect([after.activeDomainId, after.routeRevision]).toEqual([before.activeDomainId, before.routeRevision]);
  });

  it('fails non-retryably with InvalidTarget for an operation of another fleet or a malformed domain id', async () => {
    const { fleetId, east, west, operation } = await fleetWithPromotion();
    const other = await fleetWithPromotion();
    const input = { fleetId, operationId: operation.id, expectedActiveDomainId: east.id, targetDomainId: west.id };
    const foreign = await failureOf(run(acts.commitRouting, { ...input, fleetId: other.fleetId }));
    expect(foreign).toMatchObject({ type: FailureType.InvalidTarget, nonRetryable: true });
    const malformed = await failureOf(run(acts.commitRouting, { ...input, targetDomainId: 'west' }));
    expect(malformed).toMatchObject({ type: FailureType.InvalidTarget, nonRetryable: true });
  });

  it('fails retryably with StoreUnavailable while another transaction holds the fleet row', async () => {
    const { fleetId, east, west, operation } = await fleetWithPromotion();
    await tdb.store.operations.start(operation.id);
    const other = postgres(tdb.url, { max: 1, onnotice: () => {} });
    let release!: () => void;
    let locked!: () => void;
    const isLocked = new Promise<void>((resolve) => (locked = resolve));
    const holder = other.begin(async (tx) => {
      await tx`select id from fleets where id = ${fleetId} for no key update`;
      locked();
      await new Promise<void>((resolve) => (release = resolve));
    });
    try {
      await isLocked;
      const input = { fleetId, operationId: operation.id, expectedActiveDomainId: east.id, targetDomainId: west.id };
      const f = await failureOf(run(acts.commitRouting, input));
      expect(f).toMatchObject({ type: FailureType.StoreUnavailable, nonRetryable: false });
    } finally {
      release();
      await holder;
      await other.end();
    }
  });
});

describe('finishOperation', () => {
  it('fails an operation with its error, and a repeat leaves it as it is', async () => {
    const { fleetId, operation } = await fleetWithPromotion();
    await tdb.store.operations.start(operation.id);
    const error = { step: 'wakeModels', code: 'Timeout', message: 'models not awake' };
    expect(await run(acts.finishOperation, { fleetId, operationId: operation.id, outcome: 'failed', error })).toEqual({
      state: 'failed',
    });
    expect(await run(acts.finishOperation, { fleetId, operationId: operation.id, outcome: 'succeeded' })).toEqual({
      state: 'failed',
    });
    expect(await tdb.store.operations.get(operation.id)).toMatchObject({ state: 'failed', error });
  });

  it('cancels an operation', async () => {
    const { fleetId, operation } = await fleetWithPromotion();
    await tdb.store.operations.start(operation.id);
    const error = { step: 'stopTraining', code: 'Aborted', message: 'operator' };
    expect(
      await run(acts.finishOperation, { fleetId, operationId: operation.id, outcome: 'cancelled', error }),
    ).toEqual({ state: 'cancelled' });
  });
});

describe('markDomainFailed', () => {
  it('fails a domain once and says so with an event', async () => {
    const { fleetId, east } = await fleetWithPromotion();
    expect(await run(acts.markDomainFailed, { fleetId, domainId: east.id, reason: 'stale' })).toEqual({
      changed: true,
    });
    expect(await run(acts.markDomainFailed, { fleetId, domainId: east.id, reason: 'stale' })).toEqual({
      changed: false,
    });
    expect(await tdb.store.domains.get(east.id)).toMatchObject({ state: 'failed', lastError: 'stale' });
  });
});

describe('requestPromotion', () => {
  it('creates a promotion requested by the monitor, and joins the same one', async () => {
    const report = await seedLayout(tdb.store, testLayout({ fleet: `f${++fleetSlug}` }));
    const west = (await tdb.store.fleets.snapshot(report.fleetId))!.domains[1]!;
    const input = { fleetId: report.fleetId, targetDomainId: west.id, reason: 'auto-failover: east stale' };
    const created = await run(acts.requestPromotion, input);
    expect(created).toMatchObject({
      outcome: 'created',
      operation: { kind: 'promote', requestedBy: 'monitor', state: 'pending' },
    });
    expect((await run(acts.requestPromotion, input)).operation.id).toBe(created.operation.id);
  });

  it('marks the failed active failed first, in the same activity, when asked to', async () => {
    const report = await seedLayout(tdb.store, testLayout({ fleet: `f${++fleetSlug}` }));
    const [east, west] = (await tdb.store.fleets.snapshot(report.fleetId))!.domains;
    const input = {
      fleetId: report.fleetId,
      targetDomainId: west!.id,
      reason: 'auto-failover: east refused',
      failedActive: { domainId: east!.id, reason: 'east refused' },
    };
    expect(await run(acts.requestPromotion, input)).toMatchObject({ outcome: 'created' });
    expect(await tdb.store.domains.get(east!.id)).toMatchObject({ state: 'failed', lastError: 'east refused' });
    const events = (await tdb.store.events.list(report.fleetId)).map((e) => e.type);
    expect(events.slice(-2)).toEqual(['domain.state', 'operation.requested']);
    // Repeated (a retry after a lost answer): the domain stays failed with one event, the promotion is joined.
    expect(await run(acts.requestPromotion, input)).toMatchObject({ outcome: 'joined' });
    expect((await tdb.store.events.list(report.fleetId)).filter((e) => e.type === 'domain.state')).toHaveLength(
      events.filter((t) => t === 'domain.state').length,
    );
  });

  it('reports a conflict when another operation is in flight', async () => {
    const { fleetId, east } = await fleetWithPromotion('demote');
    const result = await run(acts.requestPromotion, { fleetId, targetDomainId: east.id, reason: 'x' });
    expect(result.outcome).toBe('conflict');
  });
});

describe('inspectDomain', () => {
  it('describes a domain and whether it is active', async () => {
    const { fleetId, east } = await fleetWithPromotion();
    expect(await run(acts.inspectDomain, { fleetId, domainId: east.id })).toMatchObject({
      slug: 'east',
      isActive: true,
      trainingSlotCount: 1,
    });
  });
});
