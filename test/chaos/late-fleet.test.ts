/**
 * Chaos: a fleet seeded while the worker runs gets a monitor without a worker restart (the worker's keeper
 * loop), and that monitor fails it over when its active dies.
 */
import { monitorWorkflowId } from '../../workflows/definitions';
import { type SimFleet, startSimFleet } from '../workflows/support/sim-fleet';
import { uniqueTaskQueue, useTestServer } from '../workflows/support/temporal';
import { killAndFailOver, untilViableStandby } from './support/failover-again';
import { type ChaosRig, startChaosRig } from './support/rig';

jest.setTimeout(300_000);

let rig: ChaosRig | undefined;
let late: SimFleet | undefined;
const server = useTestServer(async () => {
  if (late) {
    await server.client.workflow
      .getHandle(monitorWorkflowId(late.fleetId))
      .terminate('chaos test over')
      .catch(() => undefined);
    await late.close();
  }
  await rig?.close();
});

it('a fleet seeded after the worker started is monitored and fails over', async () => {
  rig = await startChaosRig({
    temporal: server,
    temporalAddress: process.env.TEMPORAL_TEST_ADDRESS!,
    taskQueue: uniqueTaskQueue('chaos-late-fleet'),
    workerEnv: { HARU_MONITOR_KEEP_INTERVAL_MS: '1000' },
  });
  const worker = await rig.startWorker();
  expect(worker.ready.monitors).toBe(1);

  late = await startSimFleet({ db: rig.fleet.db, policy: { autoFailover: true } });
  const monitor = server.client.workflow.getHandle(monitorWorkflowId(late.fleetId));
  await untilViableStandby(monitor, late.west);
  await killAndFailOver(late, late.east, late.west);
  const [operation] = await late.db.store.operations.list(late.fleetId);
  expect(operation).toMatchObject({ kind: 'promote', targetDomainId: late.west.id, requestedBy: 'monitor' });
});
