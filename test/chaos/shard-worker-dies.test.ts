/**
 * Chaos: the worker that holds a fleet's watch shard dies. With another worker running, the shard's watch
 * moves to it once its heartbeat timeout has passed, and the fleet fails over when its active dies. Then no
 * worker runs at all until the shard's watch has timed out for want of heartbeats; a worker that starts
 * afterwards takes the shard up, and killing the new active fails the fleet over once more, back to the
 * revived old active.
 */
import { monitorTaskQueue } from '../../core/task-queues';
import { monitorWorkflowId, watchShardWorkflowId } from '../../workflows/definitions';
import { WATCH_SHARD_HEARTBEAT_TIMEOUT_MS } from '../../workflows/activity-options';
import { type WorkerProcess, workerCounter } from '../support/worker-process';
import { eventually, uniqueTaskQueue, useTestServer } from '../workflows/support/temporal';
import { killAndFailOver, reviveAsStandby, untilViableStandby } from './support/failover-again';
import { type ChaosRig, startChaosRig } from './support/rig';

jest.setTimeout(300_000);

let rig: ChaosRig | undefined;
const revived: (() => Promise<void>)[] = [];
const server = useTestServer(async () => {
  for (const stop of revived) await stop();
  await rig?.close();
});

/** The supervisor polls a worker has made so far. */
const polls = (worker: WorkerProcess) => workerCounter(worker, 'haru_worker_domain_polls_total');

/** Waits until `worker` polls and keeps polling (its count grows over a second look). */
async function untilPolling(worker: WorkerProcess, what: string): Promise<void> {
  const before = await polls(worker);
  await eventually(what, async () => (await polls(worker)) > before + 4, 60_000, 100);
}

it('a dead watching worker’s shard moves to another worker, and to one started after every worker died', async () => {
  const taskQueue = uniqueTaskQueue('chaos-shard-dies');
  rig = await startChaosRig({
    temporal: server,
    temporalAddress: process.env.TEMPORAL_TEST_ADDRESS!,
    taskQueue,
    policy: { autoFailover: true },
    // One shard: whichever worker holds it watches the fleet.
    workerEnv: { HARU_MONITOR_SHARDS: '1', HARU_MONITOR_KEEP_INTERVAL_MS: '1000' },
  });
  const { fleet } = rig;
  const first = await rig.startWorker();
  const monitor = server.client.workflow.getHandle(monitorWorkflowId(fleet.fleetId));
  await untilViableStandby(monitor, fleet.west);
  await untilPolling(first, 'the first worker to watch the shard');
  const second = await rig.startWorker();
  const shard = server.client.workflow.getHandle(watchShardWorkflowId(taskQueue, 0, 1));
  expect((await shard.describe()).taskQueue).toBe(monitorTaskQueue(taskQueue));
  // The shard stays where it runs: the second worker only serves operations and looks meanwhile.
  const secondBefore = await polls(second);

  await first.kill();
  await untilPolling(second, 'the second worker to take the shard up after its heartbeat timeout');
  expect(secondBefore).toBeLessThan(await polls(second));
  await killAndFailOver(fleet, fleet.east, fleet.west);

  // No worker at all, until the shard's watch has timed out for want of heartbeats and waits for a worker.
  revived.push(await reviveAsStandby(fleet, fleet.east));
  await second.kill();
  await eventually(
    'the shard’s watch to time out with no worker to heartbeat it',
    async () => {
      const [pending] = (await shard.describe()).raw.pendingActivities ?? [];
      return (pending?.attempt ?? 0) >= 2 && /heartbeat/i.test(pending?.lastFailure?.message ?? '');
    },
    WATCH_SHARD_HEARTBEAT_TIMEOUT_MS + 60_000,
    200,
  );
  const third = await rig.startWorker();
  await untilPolling(third, 'a worker started after the outage to take the shard up');
  await untilViableStandby(monitor, fleet.east);
  await killAndFailOver(fleet, fleet.west, fleet.east);
  // The second promotion still demotes the dead old active after its commit: wait for both to end.
  const operations = await eventually('both promotions to end', async () => {
    const ops = await fleet.db.store.operations.list(fleet.fleetId);
    return ops.every((o) => o.state !== 'pending' && o.state !== 'running') ? ops : null;
  });
  expect(operations.map((o) => [o.kind, o.state, o.requestedBy])).toEqual([
    ['promote', 'succeeded', 'monitor'],
    ['promote', 'succeeded', 'monitor'],
  ]);
});
