/**
 * The two tiers as processes of their own (HARU_WORKER_QUEUES): one `haru worker` serves only the monitors'
 * queue, another only the operations queue. The monitor, in the first, sees the active die and starts the
 * promotion; every step of it runs in the second (its routing commit is counted there), and the monitors'
 * process never runs a step. Killing the new active once more fails the fleet over again, back to the
 * revived old active.
 */
import { monitorTaskQueue } from '../../core/task-queues';
import { monitorWorkflowId } from '../../workflows/definitions';
import { workerCounter } from '../support/worker-process';
import { uniqueTaskQueue, useTestServer } from '../workflows/support/temporal';
import { killAndFailOver, reviveAsStandby, untilViableStandby } from './support/failover-again';
import { type ChaosRig, startChaosRig } from './support/rig';

jest.setTimeout(300_000);

let rig: ChaosRig | undefined;
const revived: (() => Promise<void>)[] = [];
const server = useTestServer(async () => {
  for (const stop of revived) await stop();
  await rig?.close();
});

it('a monitors-only and an operations-only worker fail a fleet over between them, twice', async () => {
  const taskQueue = uniqueTaskQueue('chaos-split-tiers');
  rig = await startChaosRig({
    temporal: server,
    temporalAddress: process.env.TEMPORAL_TEST_ADDRESS!,
    taskQueue,
    policy: { autoFailover: true },
  });
  const { fleet } = rig;
  const monitors = await rig.startWorker({ HARU_WORKER_QUEUES: 'monitors' });
  const operations = await rig.startWorker({ HARU_WORKER_QUEUES: 'operations' });
  // The monitors' queue, and its own queue for watch shards handed on to it (workerOwnQueue).
  expect(monitors.ready.polls).toEqual([
    monitorTaskQueue(taskQueue),
    expect.stringMatching(new RegExp(`^${monitorTaskQueue(taskQueue)}/`)),
  ]);
  expect(operations.ready.polls).toEqual([taskQueue]);

  const monitor = server.client.workflow.getHandle(monitorWorkflowId(fleet.fleetId));
  await untilViableStandby(monitor, fleet.west);
  await killAndFailOver(fleet, fleet.east, fleet.west);
  const [operation] = await fleet.db.store.operations.list(fleet.fleetId);
  expect(operation).toMatchObject({ kind: 'promote', targetDomainId: fleet.west.id, requestedBy: 'monitor' });
  expect(await workerCounter(operations, 'haru_worker_routing_commits_total', { outcome: 'committed' })).toBe(1);
  expect(await workerCounter(monitors, 'haru_worker_routing_commits_total', { outcome: 'committed' })).toBe(0);
  expect(await workerCounter(monitors, 'haru_worker_domain_polls_total')).toBeGreaterThan(0);
  expect(await workerCounter(operations, 'haru_worker_domain_polls_total')).toBe(0);

  revived.push(await reviveAsStandby(fleet, fleet.east));
  await untilViableStandby(monitor, fleet.east);
  await killAndFailOver(fleet, fleet.west, fleet.east);
  expect(await workerCounter(operations, 'haru_worker_routing_commits_total', { outcome: 'committed' })).toBe(2);
  expect(await workerCounter(monitors, 'haru_worker_routing_commits_total', { outcome: 'committed' })).toBe(0);
});
