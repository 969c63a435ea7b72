/**
 * Durable execution across a crashed worker: `haru worker` runs as a child process and is SIGKILLed while a
 * promotion is waking models; a second worker process picks the promotion up and commits exactly once.
 */
import { temporal } from '@temporalio/proto';
import { monitorWorkflowId, progressQuery } from '../../workflows/definitions';
import { complete, MODEL, type SimFleet, startSimFleet } from './support/sim-fleet';
import { eventually, uniqueTaskQueue, useTestServer } from './support/temporal';
import { startWorkerProcess, type WorkerProcess } from '../support/worker-process';

jest.setTimeout(240_000);
const { PendingActivityState } = temporal.api.enums.v1;

let fleet: SimFleet;
const workers: WorkerProcess[] = [];
const server = useTestServer(async () => {
  for (const w of workers) if (w.child.exitCode === null && w.child.signalCode === null) w.child.kill('SIGKILL');
  await server.client.workflow
    .getHandle(monitorWorkflowId(fleet?.fleetId ?? ''))
    .terminate('test over')
    .catch(() => undefined);
  await fleet?.close();
});

beforeAll(async () => {
  // The wake's budget must cover the dead worker's heartbeat timeout, a new worker process's start and a
  // second slow wake, even on a loaded machine: the test is about the resume, not about the budget.
  fleet = await startSimFleet({ policy: { wakeTimeoutMs: 90_000 } });
});

it('3. a worker SIGKILLed while waking models: a new worker resumes the promotion and commits exactly once', async () => {
  const taskQueue = uniqueTaskQueue('crash');
  const store = fleet.db.store;
  // A slow wake keeps the promotion in wakeModels long enough to kill the worker there.
  await fleet.west.sim.faults.set(MODEL, { wakeDelayMs: 6_000 });
  const first = await startWorkerProcess({ databaseUrl: fleet.db.url, taskQueue });
  workers.push(first);
  expect(first.ready).toMatchObject({ taskQueue, monitors: 1, database: 'postgres' });

  const before = (await store.fleets.snapshot(fleet.fleetId))!;
  const { operation } = await store.operations.create({
    fleetId: fleet.fleetId,
    kind: 'promote',
    targetDomainId: fleet.west.id,
    reason: 'test',
    requestedBy: 'test',
  });
  await server.orchestrator(taskQueue).startOperation(operation);
  const handle = server.client.workflow.getHandle(operation.workflowId);
  await eventually(
    'the first worker to be running wakeModels',
    async () =>
      (await handle.describe()).raw.pendingActivities?.some(
        (a) => a.activityType?.name === 'wakeModels' && a.state === PendingActivityState.PENDING_ACTIVITY_STATE_STARTED,
      ),
    120_000,
  );
  // The step records itself first thing once it runs: the operation row names it.
  await eventually(
    'the operation to show the wakeModels step',
    async () => (await store.operations.get(operation.id))?.step === 'wakeModels',
  );

  first.child.kill('SIGKILL');
  expect(await first.exited).toEqual({ code: null, signal: 'SIGKILL' });

  const second = await startWorkerProcess({ databaseUrl: fleet.db.url, taskQueue });
  workers.push(second);
  expect(await handle.result()).toMatchObject({ state: 'succeeded' });

  const after = (await store.fleets.snapshot(fleet.fleetId))!;
  expect(after.activeDomainId).toBe(fleet.west.id);
  expect(after.routeRevision).toBe(before.routeRevision + 1);
  const events = await store.events.list(fleet.fleetId, { limit: 1_000 });
  expect(events.filter((e) => e.type === 'routing.committed')).toHaveLength(1);
  expect(await store.operations.get(operation.id)).toMatchObject({ state: 'succeeded', routingCommitted: true });
  expect(await complete(fleet.west.servingUrl)).not.toBe('');
  // The wake that died with the first worker was run again by the second.
  const wake = (await handle.query(progressQuery)).steps.find((s) => s.step === 'wakeModels');
  expect(wake).toMatchObject({ status: 'succeeded' });
  expect(wake!.attempts).toBeGreaterThanOrEqual(2);

  // The survivor exposes its metrics and stops cleanly on SIGTERM.
  const metrics = await (await fetch(String(second.ready.metricsUrl))).text();
  expect(metrics).toMatch(/haru_worker_activity_executions_total\{activity="wakeModels",outcome="ok"\} 1/);
  second.child.kill('SIGTERM');
  expect(await second.exited).toEqual({ code: 0, signal: null });
});
