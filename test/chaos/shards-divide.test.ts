/**
 * Chaos: a second worker divides the watch shards. One worker holds all four shards; a second starts, and the
 * first hands shards back until each holds its share (two). The second then dies (SIGKILL): its shards' watches
 * time out and come back to the first, which holds all four again, and killing the active still fails the fleet
 * over.
 */
import { type WorkerProcess, workerCounter } from '../support/worker-process';
import { eventually, uniqueTaskQueue, useTestServer } from '../workflows/support/temporal';
import { monitorWorkflowId } from '../../workflows/definitions';
import { killAndFailOver, untilViableStandby } from './support/failover-again';
import { type ChaosRig, startChaosRig } from './support/rig';

jest.setTimeout(300_000);

let rig: ChaosRig | undefined;
const server = useTestServer(async () => {
  await rig?.close();
});

/** The watch shards `worker` holds now (`haru_worker_watch_shards`). */
const held = (worker: WorkerProcess) => workerCounter(worker, 'haru_worker_watch_shards');

/** Waits until the workers hold `expected` shards each, in order. */
async function untilHolding(workers: WorkerProcess[], expected: number[], what: string): Promise<void> {
  await eventually(
    what,
    async () => {
      const now = await Promise.all(workers.map(held));
      if (!now.every((n, i) => n === expected[i])) throw new Error(`holding ${now.join(' and ')}`);
      return true;
    },
    90_000,
    200,
  );
}

it('a second worker takes half the shards, and the first takes them all back when it dies', async () => {
  rig = await startChaosRig({
    temporal: server,
    temporalAddress: process.env.TEMPORAL_TEST_ADDRESS!,
    taskQueue: uniqueTaskQueue('chaos-shards-divide'),
    policy: { autoFailover: true },
    workerEnv: { HARU_MONITOR_SHARDS: '4', HARU_MONITOR_KEEP_INTERVAL_MS: '1000' },
  });
  const { fleet } = rig;
  const first = await rig.startWorker();
  await untilHolding([first], [4], 'the first worker to hold every shard');
  const second = await rig.startWorker();
  await untilHolding([first, second], [2, 2], 'the shards divided between the two workers');

  await second.kill();
  await untilHolding([first], [4], 'the first worker to take the dead worker’s shards back');
  const monitor = server.client.workflow.getHandle(monitorWorkflowId(fleet.fleetId));
  await untilViableStandby(monitor, fleet.west);
  await killAndFailOver(fleet, fleet.east, fleet.west);
});
