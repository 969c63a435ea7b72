/**
 * Chaos: the fleet monitor must never die for good. (a) Its workflow is terminated: the worker's keeper
 * loop starts a new one within a round, and that one fails over. (b) A lock on `operations` outlasts the
 * decision's store budget while the active dies: the monitor's run survives the failed decision, decides
 * again once the lock is gone, and fails over; the fleet then fails over once more, back to the revived host.
 */
import postgres from 'postgres';
import { monitorWorkflowId } from '../../workflows/definitions';
import { eventually, uniqueTaskQueue, useTestServer } from '../workflows/support/temporal';
import { killAndFailOver, reviveAsStandby, untilViableStandby } from './support/failover-again';
import { type ChaosRig, startChaosRig } from './support/rig';

jest.setTimeout(420_000);

let rig: ChaosRig | undefined;
const cleanups: (() => Promise<void>)[] = [];
const server = useTestServer(async () => {
  for (const fn of cleanups) await fn().catch(() => undefined);
  await rig?.close();
});

afterEach(async () => {
  for (const fn of cleanups.splice(0)) await fn().catch(() => undefined);
  await rig?.close();
  rig = undefined;
});

async function monitoredRig(name: string): Promise<ChaosRig> {
  rig = await startChaosRig({
    temporal: server,
    temporalAddress: process.env.TEMPORAL_TEST_ADDRESS!,
    taskQueue: uniqueTaskQueue(name),
    policy: { autoFailover: true },
    workerEnv: { HARU_MONITOR_KEEP_INTERVAL_MS: '1000' },
  });
  await rig.startWorker();
  return rig;
}

it('a terminated monitor is started again by the worker, and the new one fails over', async () => {
  const { fleet } = await monitoredRig('chaos-monitor-terminated');
  const monitor = server.client.workflow.getHandle(monitorWorkflowId(fleet.fleetId));
  await untilViableStandby(monitor, fleet.west);
  const { runId: firstRunId } = await monitor.describe();
  await monitor.terminate('chaos: the monitor dies');

  const recreated = await eventually(
    'a new monitor run',
    async () => {
      const d = await monitor.describe();
      return d.runId !== firstRunId && d.status.name === 'RUNNING' ? d : null;
    },
    60_000,
    100,
  );
  expect(recreated.runId).not.toBe(firstRunId);
  await untilViableStandby(monitor, fleet.west);
  await killAndFailOver(fleet, fleet.east, fleet.west);
  const [operation] = await fleet.db.store.operations.list(fleet.fleetId);
  expect(operation).toMatchObject({ kind: 'promote', targetDomainId: fleet.west.id, requestedBy: 'monitor' });
});

it('a lock on operations past the decision budget does not end the monitor; it fails over, and again', async () => {
  const { fleet } = await monitoredRig('chaos-monitor-locked');
  const monitor = server.client.workflow.getHandle(monitorWorkflowId(fleet.fleetId));
  await untilViableStandby(monitor, fleet.west);
  const { runId } = await monitor.describe();

  const sql = postgres(fleet.db.url, { max: 1, onnotice: () => {} });
  cleanups.push(() => sql.end({ timeout: 5 }));
  let unlock!: () => void;
  let locked!: () => void;
  const isLocked = new Promise<void>((resolve) => (locked = resolve));
  const held = sql.begin(async (tx) => {
    await tx`lock table operations in exclusive mode`;
    locked();
    await new Promise<void>((resolve) => (unlock = resolve));
  });
  await isLocked;
  cleanups.push(async () => (unlock(), await held));

  await fleet.east.sim.kill();
  await eventually(
    'the monitor to mark east failed',
    async () => (await fleet.db.store.domains.get(fleet.east.id))?.state === 'failed',
    60_000,
    100,
  );
  // The promotion request waits on the lock: its one-minute store budget runs out before the lock goes. It is a
  // local activity: its end, a failure here, is a marker in the monitor's history.
  await eventually(
    'the decision activity to run out of its budget',
    async () => {
      const events = (await monitor.fetchHistory()).events ?? [];
      return events.some(
        (e) =>
          e.activityTaskTimedOutEventAttributes ||
          e.activityTaskFailedEventAttributes ||
          e.markerRecordedEventAttributes?.failure,
      );
    },
    120_000,
    1_000,
  );
  unlock();
  await held;

  await eventually(
    'routing to move to west',
    async () => (await rig!.routing()).activeDomainId === fleet.west.id,
    180_000,
    50,
  );
  const described = await monitor.describe();
  expect(described).toMatchObject({ runId, status: { name: 'RUNNING' } });

  // The fleet can fail over again: east comes back as a standby, west dies.
  cleanups.push(await reviveAsStandby(fleet, fleet.east));
  await untilViableStandby(monitor, fleet.east, 180_000);
  await killAndFailOver(fleet, fleet.west, fleet.east);
});
