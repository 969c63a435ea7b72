/**
 * Chaos: a promotion's workflow is terminated mid-wake, leaving its operation row `running` with no
 * workflow. The worker's keeper loop ends it (an `operation.orphaned` event says how), which frees the
 * fleet's in-flight slot: a kill of the active is then failed over.
 */
import { uniqueTaskQueue, useTestServer, eventually } from '../workflows/support/temporal';
import { killAndFailOver, untilViableStandby } from './support/failover-again';
import { type ChaosRig, setPolicy, startChaosRig } from './support/rig';
import { monitorWorkflowId } from '../../workflows/definitions';

jest.setTimeout(300_000);

let rig: ChaosRig | undefined;
const server = useTestServer(async () => {
  await rig?.close();
});

it('a promotion terminated mid-wake is ended by the worker, and the fleet fails over again', async () => {
  rig = await startChaosRig({
    temporal: server,
    temporalAddress: process.env.TEMPORAL_TEST_ADDRESS!,
    taskQueue: uniqueTaskQueue('chaos-orphan'),
    wakeDelayMs: 6_000,
    policy: { wakeTimeoutMs: 60_000 },
    workerEnv: { HARU_MONITOR_KEEP_INTERVAL_MS: '1000' },
  });
  const { fleet } = rig;
  await rig.startWorker();
  const { operation, handle } = await rig.promote(fleet.west);
  await rig.waitForStep(operation.id, 'wakeModels');
  await handle.terminate('chaos: the promotion workflow dies mid-wake');

  const ended = await eventually(
    'the orphaned operation to be ended',
    async () => {
      const op = await fleet.db.store.operations.get(operation.id);
      return op && op.state !== 'running' && op.state !== 'pending' ? op : null;
    },
    60_000,
    100,
  );
  expect(ended).toMatchObject({ state: 'failed', error: { step: 'wakeModels', code: 'workflow_ended' } });
  const events = await fleet.db.store.events.list(fleet.fleetId, { limit: 1_000 });
  expect(events.filter((e) => e.type === 'operation.orphaned')).toEqual([
    expect.objectContaining({
      operationId: operation.id,
      data: { action: 'ended', to: 'failed', workflowStatus: 'TERMINATED', step: 'wakeModels' },
    }),
  ]);
  expect((await rig.routing()).activeDomainId).toBe(fleet.east.id);

  // The fleet can fail over: auto-failover on, the active dies, the monitor promotes west.
  await setPolicy(rig, { autoFailover: true });
  const monitor = server.client.workflow.getHandle(monitorWorkflowId(fleet.fleetId));
  await untilViableStandby(monitor, fleet.west, 120_000);
  await killAndFailOver(fleet, fleet.east, fleet.west);
});
