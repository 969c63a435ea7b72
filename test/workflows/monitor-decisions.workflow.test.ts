/**
 * The fleet monitor's decisions against the real dev server with stub activities: what it does with an
 * observation, its signals and its health query. End-to-end failover with simulated hosts lives beside this file.
 */
import { ApplicationFailure } from '@temporalio/common';
import { Worker } from '@temporalio/worker';
import type { Activities } from '../../activities';
import type { FleetObservation, LookAtFleetInput } from '../../activities/fleet-monitor';
import type { DomainView, FleetView } from '../../core/fleet-view';
import {
  checkNowSignal,
  healthQuery,
  monitorWorkflowId,
  observedSignal,
  operationWorkflowId,
  pauseAutoFailoverSignal,
  resumeAutoFailoverSignal,
} from '../../workflows/definitions';
import { fleetMonitorWorkflow } from '../../workflows';
import { workflowBundle } from './support/bundle';
import { fastPolicy, STUB, stubActivities } from './support/stub-activities';
import { eventually, uniqueTaskQueue, useTestServer } from './support/temporal';

const server = useTestServer();

// Staleness is not under test here: a loaded machine must not make a scripted heartbeat look old.
const policy = fastPolicy({ heartbeatStaleMs: 600_000 });
const domain = (over: Partial<DomainView>): DomainView => ({
  id: STUB.active,
  slug: 'a',
  state: 'ready',
  stateChangedAt: new Date(Date.now() - 60_000).toISOString(),
  lastSeenAt: new Date().toISOString(),
  consecutiveFailures: 0,
  lastError: null,
  modelNames: ['llama'],
  trainingGpus: [0],
  ...over,
});
const observation = (
  fleetId: string,
  active: Partial<DomainView> = {},
  over: Partial<FleetView> = {},
): FleetObservation => ({
  fleet: {
    id: fleetId,
    slug: 'f',
    activeDomainId: STUB.active,
    routeRevision: 1,
    domains: [domain(active), domain({ id: STUB.standby, slug: 'b' })],
    inFlightOperation: null,
    ...over,
  },
  policy,
  autoFailoverPause: null,
  observedAt: new Date().toISOString(),
  reason: 'decision_due',
  polls: 1,
});
const failingActive = { consecutiveFailures: 3, lastError: 'ECONNREFUSED' };

/**
 * A monitor with stub activities over a scripted world: its own look (`lookAtFleet`) answers the world as it
 * is; `observe` sends it the world as its watch shard would (the `observed` signal). The world's stored pause
 * is what `setAutoFailoverPause` last wrote, as in the fleet's row.
 */
function monitorHarness(overrides: Partial<Activities> = {}) {
  const fleetId = crypto.randomUUID();
  let world = observation(fleetId);
  const looks: LookAtFleetInput[] = [];
  const stubs = stubActivities({
    async setAutoFailoverPause({ paused, by, reason }) {
      const pause = paused ? { by, reason: reason ?? null, at: new Date().toISOString() } : null;
      const changed = (world.autoFailoverPause !== null) !== paused;
      world = { ...world, autoFailoverPause: pause };
      return { changed };
    },
    ...overrides,
    async lookAtFleet(input) {
      looks.push(input);
      return { ...world, reason: 'immediate', observedAt: new Date().toISOString() };
    },
  });
  /** Scripts the fleet's domains and policy; the stored pause stays as it was written. */
  const set = (next: FleetObservation) => void (world = { ...next, autoFailoverPause: world.autoFailoverPause });
  type Handle = Awaited<ReturnType<typeof start>>;
  /** Signals the world as the fleet's shard would, observed now (or at `observedAt`). */
  const observe = (handle: Handle, observedAt = new Date().toISOString()) =>
    handle.signal(observedSignal, { ...world, reason: 'decision_due', observedAt });
  const taskQueue = uniqueTaskQueue('monitor');
  const start = () =>
    server.client.workflow.start(fleetMonitorWorkflow, {
      taskQueue,
      workflowId: monitorWorkflowId(fleetId),
      args: [{ fleetId }],
    });
  const run = async <T>(fn: (handle: Handle) => Promise<T>): Promise<T> => {
    const worker = await Worker.create({
      connection: server.connection,
      taskQueue,
      workflowBundle: workflowBundle(),
      activities: stubs.activities,
    });
    return worker.runUntil(async () => {
      const handle = await start();
      try {
        return await fn(handle);
      } finally {
        await handle.terminate('test over');
      }
    });
  };
  return { fleetId, set, observe, looks, calls: stubs.calls, run };
}

describe('fleetMonitorWorkflow', () => {
  it('looks at once on start and answers health from that look', async () => {
    const h = monitorHarness();
    await h.run(async (handle) => {
      const health = await eventually('health', () => handle.query(healthQuery));
      expect(health).toMatchObject({
        fleetId: h.fleetId,
        activeDomainId: STUB.active,
        standbyRanking: [STUB.standby],
        activeFailure: null,
      });
      expect(h.looks).toEqual([{ fleetId: h.fleetId }]);
    });
  });

  it('fails a failing active and promotes the best standby as a child operation, with no human action', async () => {
    const asked: Parameters<Activities['requestPromotion']>[0][] = [];
    const stub = stubActivities().activities;
    const h = monitorHarness({
      async requestPromotion(input) {
        asked.push(input);
        return stub.requestPromotion(input);
      },
    });
    h.set(observation(h.fleetId, failingActive));
    await h.run(async () => {
      const promotion = server.client.workflow.getHandle(operationWorkflowId(h.fleetId, STUB.op));
      await eventually('the promotion to be started', () => promotion.describe().catch(() => null));
      expect(await promotion.result()).toMatchObject({ state: 'succeeded' });
      const described = await promotion.describe();
      expect(described.parentExecution?.workflowId).toBe(monitorWorkflowId(h.fleetId));
    });
    // One activity marks the active failed and asks for the promotion.
    expect(h.calls.slice(0, 2)).toEqual(['lookAtFleet', 'requestPromotion']);
    expect(h.calls).not.toContain('markDomainFailed');
    expect(asked).toEqual([
      {
        fleetId: h.fleetId,
        targetDomainId: STUB.standby,
        reason: expect.stringMatching(/^auto-failover: active domain \S+ failed 3 consecutive polls/),
        failedActive: { domainId: STUB.active, reason: expect.stringMatching(/failed 3 consecutive polls/) },
      },
    ]);
  });

  it('while paused marks the active failed but promotes nobody; resuming promotes', async () => {
    const h = monitorHarness();
    await h.run(async (handle) => {
      await eventually('the first look', () => handle.query(healthQuery));
      await handle.signal(pauseAutoFailoverSignal);
      await eventually(
        'a paused look',
        async () => h.looks.length === 2 && (await handle.query(healthQuery))?.isAutoFailoverPaused,
      );
      expect(h.calls.filter((c) => c === 'setAutoFailoverPause')).toHaveLength(1);
      h.set(observation(h.fleetId, failingActive));
      await h.observe(handle);
      const paused = await eventually('health to show the blocked failover', async () => {
        const health = await handle.query(healthQuery);
        return health?.activeFailure ? health : null;
      });
      expect(paused).toMatchObject({
        isAutoFailoverPaused: true,
        failoverBlockedBy: 'paused',
        activeFailure: { reason: 'consecutive_failures' },
      });
      // Health is answered from the workflow's decision; the activity that records it runs after that task.
      await eventually('the active marked failed', () => h.calls.includes('markDomainFailed'));
      expect(h.calls).not.toContain('requestPromotion');

      h.set(observation(h.fleetId, { state: 'failed' }));
      await handle.signal(resumeAutoFailoverSignal);
      await eventually('the promotion request', () => h.calls.includes('requestPromotion'));
      const promotion = server.client.workflow.getHandle(operationWorkflowId(h.fleetId, STUB.op));
      await eventually('the promotion to be started', () => promotion.describe().catch(() => null));
      expect(await promotion.result()).toMatchObject({ state: 'succeeded' });
    });
  });

  it('keeps watching when a standby replacement cannot be started (the domain is gone from the store)', async () => {
    const h = monitorHarness({
      async recordStandbyReplacement() {
        throw ApplicationFailure.nonRetryable('domain does not exist', 'InvalidTarget');
      },
    });
    const failedStandby = domain({
      id: STUB.standby,
      slug: 'b',
      provider: 'skypilot',
      state: 'failed',
      stateChangedAt: new Date(Date.now() - 600_000).toISOString(),
    });
    const base = observation(h.fleetId);
    h.set({
      ...base,
      policy: { ...policy, replaceFailedStandby: { enabled: true, graceMs: 1 } },
      fleet: { ...base.fleet, domains: [base.fleet.domains[0]!, failedStandby] },
    });
    await h.run(async (handle) => {
      await eventually('the replacement to be tried', () => h.calls.includes('recordStandbyReplacement'));
      const looksBefore = h.looks.length;
      await handle.signal(checkNowSignal);
      await eventually('another look after the failed replacement', () => h.looks.length > looksBefore);
      expect((await handle.describe()).status.name).toBe('RUNNING');
    });
  });

  it('checkNow looks again at once, without waiting for its shard', async () => {
    const h = monitorHarness();
    await h.run(async (handle) => {
      const first = await eventually('the first look', () => handle.query(healthQuery));
      expect(h.looks).toHaveLength(1);
      h.set(observation(h.fleetId, failingActive));
      await handle.signal(checkNowSignal);
      const second = await eventually('a fresh look', async () => {
        const health = await handle.query(healthQuery);
        return health && health.checkedAt > first.checkedAt ? health : null;
      });
      expect(h.looks).toHaveLength(2);
      expect(second.activeFailure).toMatchObject({ reason: 'consecutive_failures' });
    });
  });

  it('decides on what its shard signals in the order it arrives, whatever the clocks of the workers that made it', async () => {
    const h = monitorHarness();
    await h.run(async (handle) => {
      const first = await eventually('the first look', () => handle.query(healthQuery));
      // A worker whose clock runs a minute ahead signals a healthy fleet: decided on.
      const ahead = new Date(Date.parse(first.checkedAt) + 60_000).toISOString();
      await h.observe(handle, ahead);
      await eventually(
        'the ahead observation decided',
        async () => (await handle.query(healthQuery))?.checkedAt === ahead,
      );
      // Then a worker whose clock runs a minute behind sees the active failing: it arrived last, so it is the
      // newest, and the failover it calls for happens (ordered by the workers' clocks, it would be dropped).
      h.set(observation(h.fleetId, failingActive));
      await h.observe(handle, new Date(Date.parse(first.checkedAt) - 60_000).toISOString());
      await eventually('the failover the last observation calls for', () => h.calls.includes('requestPromotion'));
      expect(h.calls.filter((c) => c === 'lookAtFleet')).toHaveLength(1);
    });
  });

  it('starts a pending operation whose workflow is missing', async () => {
    const h = monitorHarness();
    const opId = crypto.randomUUID();
    const old = new Date(Date.now() - 60_000).toISOString();
    h.set(
      observation(
        h.fleetId,
        {},
        {
          inFlightOperation: {
            id: opId,
            kind: 'promote',
            state: 'pending',
            targetDomainId: STUB.standby,
            createdAt: old,
          },
        },
      ),
    );
    await h.run(async () => {
      const promotion = server.client.workflow.getHandle(operationWorkflowId(h.fleetId, opId));
      await eventually('the orphaned promotion to be started', () => promotion.describe().catch(() => null));
      expect(await promotion.result()).toMatchObject({ operationId: opId, state: 'succeeded' });
    });
  });
});
