/**
 * The fleet monitor's decisions against the real dev server with stub activities: what it does with an
 * observation, its signals and its health query. End-to-end failover with simulated hosts lives beside this file.
 */
import { Context } from '@temporalio/activity';
import { ApplicationFailure } from '@temporalio/common';
import { Worker } from '@temporalio/worker';
import type { Activities } from '../../activities';
import type { FleetObservation, WatchFleetInput } from '../../activities/fleet-monitor';
import type { DomainView, FleetView } from '../../core/fleet-view';
import {
  checkNowSignal,
  healthQuery,
  monitorWorkflowId,
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
  observedAt: new Date().toISOString(),
  reason: 'decision_due',
  polls: 1,
});
const failingActive = { consecutiveFailures: 3, lastError: 'ECONNREFUSED' };

/**
 * A monitor with stub activities over a scripted world: a watch answers at once for an immediate look,
 * otherwise it waits (heartbeating, cancellable) until the test changes the world with `set`.
 */
function monitorHarness(overrides: Partial<Activities> = {}) {
  const fleetId = crypto.randomUUID();
  let world = observation(fleetId);
  let version = 0;
  // A watch returns once the world changed since the last answer (also a change made between two watches).
  let returned = 0;
  const watches: WatchFleetInput[] = [];
  const cancelledWatches: number[] = [];
  const stubs = stubActivities({
    ...overrides,
    async watchFleet(input) {
      watches.push(input);
      const n = watches.length;
      while (!input.isImmediate && version === returned) {
        Context.current().heartbeat({ waiting: true });
        try {
          await Context.current().sleep(25);
        } catch (err) {
          cancelledWatches.push(n);
          throw err;
        }
      }
      returned = version;
      return { ...world, observedAt: new Date().toISOString() };
    },
  });
  const set = (next: FleetObservation) => {
    world = next;
    version += 1;
  };
  const taskQueue = uniqueTaskQueue('monitor');
  const start = () =>
    server.client.workflow.start(fleetMonitorWorkflow, {
      taskQueue,
      workflowId: monitorWorkflowId(fleetId),
      args: [{ fleetId }],
    });
  const run = async <T>(fn: (handle: Awaited<ReturnType<typeof start>>) => Promise<T>): Promise<T> => {
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
  return { fleetId, set, watches, cancelledWatches, calls: stubs.calls, run };
}

describe('fleetMonitorWorkflow', () => {
  it('polls at once on start and answers health from that look', async () => {
    const h = monitorHarness();
    await h.run(async (handle) => {
      const health = await eventually('health', () => handle.query(healthQuery));
      expect(health).toMatchObject({
        fleetId: h.fleetId,
        activeDomainId: STUB.active,
        standbyRanking: [STUB.standby],
        activeFailure: null,
      });
      expect(h.watches[0]).toMatchObject({ isImmediate: true, isAutoFailoverPaused: false });
    });
  });

  it('fails a failing active and promotes the best standby as a child operation, with no human action', async () => {
    const h = monitorHarness();
    h.set(observation(h.fleetId, failingActive));
    await h.run(async () => {
      const promotion = server.client.workflow.getHandle(operationWorkflowId(h.fleetId, STUB.op));
      await eventually('the promotion to be started', () => promotion.describe().catch(() => null));
      expect(await promotion.result()).toMatchObject({ state: 'succeeded' });
      const described = await promotion.describe();
      expect(described.parentExecution?.workflowId).toBe(monitorWorkflowId(h.fleetId));
    });
    expect(h.calls.slice(0, 3)).toEqual(['watchFleet', 'markDomainFailed', 'requestPromotion']);
  });

  it('while paused marks the active failed but promotes nobody; resuming promotes', async () => {
    const h = monitorHarness();
    await h.run(async (handle) => {
      await eventually('the first look', () => handle.query(healthQuery));
      await handle.signal(pauseAutoFailoverSignal);
      await eventually('a paused look', () => h.watches.some((w) => w.isAutoFailoverPaused && w.isImmediate));
      h.set(observation(h.fleetId, failingActive));
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
      const watchesBefore = h.watches.length;
      await handle.signal(checkNowSignal);
      await eventually('another look after the failed replacement', () => h.watches.length > watchesBefore);
      expect((await handle.describe()).status.name).toBe('RUNNING');
    });
  });

  it('checkNow cancels the waiting watch and looks again at once', async () => {
    const h = monitorHarness();
    await h.run(async (handle) => {
      await eventually('a waiting watch', () => h.watches.length === 2);
      await handle.signal(checkNowSignal);
      await eventually(
        'the cancelled watch and a fresh look',
        () => h.cancelledWatches.includes(2) && h.watches[2]?.isImmediate,
      );
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
