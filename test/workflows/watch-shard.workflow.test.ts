/**
 * The watch shards' workflow and the worker's keeper against the real dev server: one workflow per shard of a
 * deployment, its watches one after another across checkpoints, its retirement by a worker that deals the
 * fleets over another number of shards, and `keepMonitors` starting what ended.
 */
import { temporal } from '@temporalio/proto';
import { DefaultLogger, Worker } from '@temporalio/worker';
import { testLayout } from '../../db/fixtures';
import { createTestDatabase, seedLayout, type TestDatabase } from '../../db/testing';
import { monitorTaskQueue } from '../../core/task-queues';
import type { WatchShardInput, WatchShardResult } from '../../activities/watch-shard';
import { workflowBundle } from './support/bundle';
import { ensureWatchShards, keepMonitors } from '../../workers/start';
import { monitorWorkflowId, watchShardWorkflowId } from '../../workflows/definitions';
import { watchShardStart } from '../../workflows/start-options';
import { replayAndRecord, startTestWorker } from './support/worker';
import { eventually, uniqueTaskQueue, useTestServer } from './support/temporal';

let db: TestDatabase;
const cleanups: (() => Promise<unknown>)[] = [];
const server = useTestServer(async () => {
  for (const fn of cleanups.reverse()) await fn().catch(() => undefined);
  await db?.drop();
});

beforeAll(async () => {
  db = await createTestDatabase();
});

const terminateLater = (workflowId: string) =>
  cleanups.push(() => server.client.workflow.getHandle(workflowId).terminate('test over'));

/** Starts the watch of shard `shard` of `shards` on `taskQueue`'s monitors' queue (watches of `checkpointMs` when given). */
async function startShard(taskQueue: string, shard: number, shards: number, checkpointMs?: number) {
  const { workflowType, options } = watchShardStart(taskQueue, shard, shards);
  const handle = await server.client.workflow.start(workflowType, {
    ...options,
    ...(checkpointMs !== undefined ? { args: [{ ...options.args[0], checkpointMs }] } : {}),
    taskQueue: monitorTaskQueue(taskQueue),
  });
  terminateLater(handle.workflowId);
  return handle;
}

it('starts every shard of a deployment once however often asked, each named by its queue, number and count', async () => {
  const taskQueue = uniqueTaskQueue('shards');
  await ensureWatchShards(server.client, taskQueue, 3);
  const ids = [0, 1, 2].map((shard) => watchShardWorkflowId(taskQueue, shard, 3));
  ids.forEach(terminateLater);
  expect(ids).toEqual([0, 1, 2].map((shard) => `haru/watch/${taskQueue}/${shard}-of-3`));
  const first = await Promise.all(ids.map((id) => server.client.workflow.getHandle(id).describe()));
  await ensureWatchShards(server.client, taskQueue, 3);
  const second = await Promise.all(ids.map((id) => server.client.workflow.getHandle(id).describe()));
  expect(second.map((d) => d.runId)).toEqual(first.map((d) => d.runId));
  expect(first.map((d) => [d.type, d.taskQueue, d.status.name])).toEqual(
    ids.map(() => ['watchShardWorkflow', monitorTaskQueue(taskQueue), 'RUNNING']),
  );
});

it('ends a shard that a worker dealing the fleets over another number of shards picks up', async () => {
  const taskQueue = uniqueTaskQueue('retire');
  const worker = await startTestWorker(server.connection, db.store, taskQueue, { watchShards: 3 });
  cleanups.push(() => worker.stop());
  const handle = await startShard(taskQueue, 0, 2);
  await handle.result();
  const history = await handle.fetchHistory();
  const watches = history.events!.filter((e) => e.activityTaskScheduledEventAttributes);
  expect(watches).toHaveLength(1);
});

it('hands back at each checkpoint and watches on, each watch following on from the last', async () => {
  const taskQueue = uniqueTaskQueue('checkpoints');
  const worker = await startTestWorker(server.connection, db.store, taskQueue, { watchShards: 1 });
  cleanups.push(() => worker.stop());
  const handle = await startShard(taskQueue, 0, 1, 200);
  const inputs = await eventually('three watches', async () => {
    const history = await handle.fetchHistory();
    const scheduled = history.events!.flatMap((e) => {
      const attributes = e.activityTaskScheduledEventAttributes;
      if (!attributes) return [];
      const payload = attributes.input!.payloads![0]!;
      return [JSON.parse(Buffer.from(payload.data!).toString()) as WatchShardInput];
    });
    return scheduled.length >= 3 ? scheduled : null;
  });
  expect(inputs[0]).toEqual({ shard: 0, shards: 1, checkpointMs: 200 });
  const [, second, third] = inputs;
  // The first watch's start is when the watching began; each next one carries it and the last look.
  expect(second).toMatchObject({ watchingSince: expect.any(String), lookedUntil: expect.any(String) });
  expect(third!.watchingSince).toBe(second!.watchingSince);
  expect(Date.parse(third!.lookedUntil!)).toBeGreaterThan(Date.parse(second!.lookedUntil!));
  await replayAndRecord(server.client, handle, 'watch-shard');
});

it('keeps the shards and a monitor per fleet with one listing a round, and starts again what ended', async () => {
  const taskQueue = uniqueTaskQueue('keeper');
  const { fleetId } = await seedLayout(db.store, testLayout({ fleet: 'kept' }));
  const keeper = keepMonitors({
    client: server.client,
    store: db.store,
    taskQueue,
    intervalMs: 200,
    logger: new DefaultLogger('ERROR'),
    shards: 2,
  });
  cleanups.push(() => keeper.stop());
  const monitor = server.client.workflow.getHandle(monitorWorkflowId(fleetId));
  const shard = server.client.workflow.getHandle(watchShardWorkflowId(taskQueue, 1, 2));
  [monitor.workflowId, shard.workflowId, watchShardWorkflowId(taskQueue, 0, 2)].forEach(terminateLater);
  const first = await eventually('the monitor and the shards', async () => {
    const [m, s] = await Promise.all([monitor.describe(), shard.describe()]).catch(() => [null, null]);
    return m && s ? { monitor: m.runId, shard: s.runId } : null;
  });
  await monitor.terminate('gone');
  await shard.terminate('gone');
  const again = await eventually('a new monitor and a new shard', async () => {
    const [m, s] = await Promise.all([monitor.describe(), shard.describe()]);
    return m.status.name === 'RUNNING' && s.status.name === 'RUNNING' ? { monitor: m.runId, shard: s.runId } : null;
  });
  expect(again.monitor).not.toBe(first.monitor);
  expect(again.shard).not.toBe(first.shard);
});

it('sends the next watch to the worker a watch handed the shard to, and to the shared queue when nobody takes it up', async () => {
  const taskQueue = uniqueTaskQueue('hand-on');
  const gone = `${monitorTaskQueue(taskQueue)}/gone-worker`;
  const calls: { queue: string; input: WatchShardInput }[] = [];
  const result = (over: Partial<WatchShardResult> = {}): WatchShardResult => ({
    retired: false,
    fleets: 0,
    rounds: 1,
    signalled: 0,
    observedAt: new Date().toISOString(),
    ...over,
  });
  // The first watch hands the shard to a worker that never polls its queue; the next, back on the shared queue,
  // returns at its checkpoint.
  const worker = await Worker.create({
    connection: server.connection,
    taskQueue: monitorTaskQueue(taskQueue),
    workflowBundle: workflowBundle(),
    activities: {
      async watchShard(input: WatchShardInput): Promise<WatchShardResult> {
        calls.push({ queue: monitorTaskQueue(taskQueue), input });
        return calls.length === 1 ? result({ handTo: gone }) : result();
      },
    },
  });
  const running = worker.run();
  cleanups.push(async () => {
    worker.shutdown();
    await running;
  });
  const handle = await startShard(taskQueue, 0, 1, 200);
  await eventually('a watch back on the shared queue', async () => calls.length >= 2, 30_000);
  const history = await handle.fetchHistory();
  const scheduled = history.events!.flatMap((e) =>
    e.activityTaskScheduledEventAttributes ? [e.activityTaskScheduledEventAttributes.taskQueue!.name] : [],
  );
  expect(scheduled.slice(0, 3)).toEqual([monitorTaskQueue(taskQueue), gone, monitorTaskQueue(taskQueue)]);
  const timedOut = history.events!.find((e) => e.activityTaskTimedOutEventAttributes);
  expect(timedOut?.activityTaskTimedOutEventAttributes?.failure?.timeoutFailureInfo?.timeoutType).toBe(
    temporal.api.enums.v1.TimeoutType.TIMEOUT_TYPE_SCHEDULE_TO_START,
  );
});
