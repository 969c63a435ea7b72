/**
 * Chaos: a region dies. 20 fleets fail over at the same moment, each promotion requested as the API
 * requests it (operation row, then the workflow, all at once), while every fleet's monitor runs on the same
 * `haru worker` process. Every fleet must move its routing exactly once: one promotion per fleet, one
 * routing revision, one `routing.committed` event, no second operation, and a second request for each fleet
 * joins the first. The monitors run on their own task queue, the operations on theirs (core/task-queues.ts).
 *
 * The simulated domains of all fleets live in this process (bench/support/sim-host.ts), as in `bench:scale`.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { startSimHost, type SimHost } from '../../bench/support/sim-host';
import { monitorTaskQueue } from '../../core/task-queues';
import { createTestDatabase, type TestDatabase } from '../../db/testing';
import { monitorWorkflowId } from '../../workflows/definitions';
import { startWorkerProcess, type WorkerProcess } from '../support/worker-process';
import { TEST_POLICY } from '../workflows/support/sim-fleet';
import { uniqueTaskQueue, useTestServer } from '../workflows/support/temporal';
import {
  type SeededFleet,
  seedReadyFleets,
  simLayouts,
  terminateMonitors,
  untilEveryDomainPolled,
} from './support/many-fleets';

jest.setTimeout(600_000);

const FLEETS = 20;
const server = useTestServer();

/**
 * The monitors watch but never promote on their own: the test requests every promotion itself. They poll
 * every 5 s with wide step budgets: 40 simulated supervisors in one process on a shared two-core machine take
 * tens of ms of CPU per status read and, under load, seconds to answer, and 20 promotions at once read the
 * hosts' status many times each; a read answered late is retried within its step.
 */
const POLICY = {
  ...TEST_POLICY,
  autoFailover: false,
  heartbeatIntervalMs: 5_000,
  heartbeatStaleMs: 60_000,
  stopTrainingTimeoutMs: 180_000,
  verifyGpuTimeoutMs: 180_000,
  wakeTimeoutMs: 180_000,
  probeTimeoutMs: 180_000,
  commitTimeoutMs: 60_000,
  drainTimeoutMs: 5_000,
  sleepTimeoutMs: 120_000,
  startTrainingTimeoutMs: 120_000,
};

let db: TestDatabase | undefined;
let host: SimHost | undefined;
let worker: WorkerProcess | undefined;
let stateDir: string | undefined;
const fleets: SeededFleet[] = [];

afterAll(async () => {
  await worker?.stop();
  await terminateMonitors(server.client, fleets);
  await host?.stop();
  await db?.drop();
  if (stateDir) rmSync(stateDir, { recursive: true, force: true });
});

it('20 fleets failing over at once, monitors running, each move routing exactly once, and all can fail over again', async () => {
  const taskQueue = uniqueTaskQueue('chaos-mass-failover');
  stateDir = mkdtempSync(path.join(os.tmpdir(), 'haru-mass-failover-'));
  db = await createTestDatabase();
  const layouts = await simLayouts(FLEETS, 'mass', stateDir, POLICY);
  host = await startSimHost({ layouts, stateDir, standby: (_fleet, domain) => domain === 'west' });
  fleets.push(...(await seedReadyFleets(db, layouts)));

  worker = await startWorkerProcess({ databaseUrl: db.url, taskQueue, env: { LOG_LEVEL: 'info' } });
  // Every monitor is polling: the failover competes with the monitoring, as it does in production.
  await untilEveryDomainPolled(db, fleets);

  const orchestrator = server.orchestrator(taskQueue);
  const request = (f: SeededFleet) =>
    db!.store.operations.create({
      fleetId: f.fleetId,
      kind: 'promote',
      targetDomainId: f.westId,
      reason: 'region down',
      requestedBy: 'test',
    });
  const started = await Promise.all(
    fleets.map(async (f) => {
      const { outcome, operation } = await request(f);
      expect(outcome).toBe('created');
      expect(await orchestrator.startOperation(operation)).toBe('started');
      // A second request while it runs joins it, and its start runs nothing twice.
      const again = await request(f);
      expect([again.outcome, again.operation.id]).toEqual(['joined', operation.id]);
      expect(await orchestrator.startOperation(again.operation)).toBe('already_started');
      return operation;
    }),
  );
  const results = await Promise.all(started.map((op) => server.client.workflow.getHandle(op.workflowId).result()));

  for (const f of fleets) {
    const operations = await db.store.operations.list(f.fleetId);
    // One operation per fleet: the requested promotion of its standby, nothing started twice.
    expect(operations.map((o) => [o.kind, o.requestedBy, o.targetDomainId, o.routingCommitted])).toEqual([
      ['promote', 'test', f.westId, true],
    ]);
    const [promotion] = operations;
    const handle = server.client.workflow.getHandle(promotion!.workflowId);
    expect(results[fleets.indexOf(f)]).toMatchObject({ state: 'succeeded', routeRevision: f.routeRevision + 1 });
    // The operations run on the operations queue, the monitors on theirs.
    expect((await handle.describe()).taskQueue).toBe(taskQueue);
    expect((await server.client.workflow.getHandle(monitorWorkflowId(f.fleetId)).describe()).taskQueue).toBe(
      monitorTaskQueue(taskQueue),
    );

    const snapshot = (await db.store.fleets.snapshot(f.fleetId))!;
    expect([snapshot.activeDomainId, snapshot.routeRevision]).toEqual([f.westId, f.routeRevision + 1]);
    expect(await db.store.operations.get(promotion!.id)).toMatchObject({
      state: 'succeeded',
      routeRevision: f.routeRevision + 1,
    });
    const events = await db.store.events.list(f.fleetId, { limit: 1_000 });
    expect(events.filter((e) => e.type === 'routing.committed').map((e) => e.operationId)).toEqual([promotion!.id]);
  }

  // And every fleet can fail over again, all at once: the old actives, demoted to standby, take the traffic back.
  const back = await Promise.all(
    fleets.map(async (f) => {
      const { outcome, operation } = await db!.store.operations.create({
        fleetId: f.fleetId,
        kind: 'promote',
        targetDomainId: f.eastId,
        reason: 'region back',
        requestedBy: 'test',
      });
      expect(outcome).toBe('created');
      expect(await orchestrator.startOperation(operation)).toBe('started');
      return server.client.workflow.getHandle(operation.workflowId).result();
    }),
  );
  for (const [i, f] of fleets.entries()) {
    expect(back[i]).toMatchObject({ state: 'succeeded', routeRevision: f.routeRevision + 2 });
    const snapshot = (await db.store.fleets.snapshot(f.fleetId))!;
    expect([snapshot.activeDomainId, snapshot.routeRevision]).toEqual([f.eastId, f.routeRevision + 2]);
  }
});
