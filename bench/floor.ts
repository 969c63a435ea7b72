/**
 * `npm run bench:floor`: the floor Temporal itself puts under a promotion on this machine. A workflow that
 * runs N no-op activities one after another (N = 5: the five steps up to the commit; the operation begins in a
 * local activity, inside the first workflow task),
 * on a Temporal dev server like the other benchmarks' and a worker in this process with the SDK's
 * defaults; wall time from the start request to the result, and the time per workflow task and per
 * activity from the history. Nothing of Haru runs: the gap between this and bench:failover's overhead is
 * Haru's.
 */
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { Client, Connection } from '@temporalio/client';
import { bundleWorkflowCode, NativeConnection, Worker } from '@temporalio/worker';
import { historyBreakdown } from './support/history';
import { printTable, writeResult } from './support/report';
import { startBenchTemporal } from './support/stack';
import { fmt, median } from './support/stats';

const { values: args } = parseArgs({
  options: {
    runs: { type: 'string', default: '20' },
    steps: { type: 'string', default: '5' },
    'temporal-address': { type: 'string' },
  },
});
const RUNS = Number(args.runs);
const STEPS = Number(args.steps);
if (!Number.isInteger(RUNS) || RUNS < 1 || !Number.isInteger(STEPS) || STEPS < 1) {
  throw new Error('--runs and --steps must be positive integers');
}

const quiet = { trace() {}, debug() {}, info() {}, log() {}, warn() {}, error: (m: string) => console.error(m) };

const REPLAYS = 30;

/**
 * The CPU Haru's own workflow code takes per workflow task: the recorded promotion history replayed
 * REPLAYS times in one batch (after one warm-up batch), divided by its workflow tasks. An upper bound: it
 * includes the replay worker's own work.
 */
async function replayPromotionMs(): Promise<{ workflowTasks: number; perWorkflowTaskMs: number }> {
  const { code } = await bundleWorkflowCode({ workflowsPath: require.resolve('../workflows'), logger: quiet });
  const file = path.resolve(__dirname, '..', 'test/workflows/histories/promotion.json');
  const history = JSON.parse(readFileSync(file, 'utf8')) as {
    events: { workflowTaskCompletedEventAttributes?: unknown }[];
  };
  const workflowTasks = history.events.filter((e) => e.workflowTaskCompletedEventAttributes).length;
  const batch = async () => {
    const histories = Array.from({ length: REPLAYS }, (_, i) => ({ workflowId: `replay-${i}`, history }));
    for await (const r of Worker.runReplayHistories({ workflowBundle: { code } }, histories)) {
      if (r.error) throw r.error;
    }
  };
  await batch();
  const startedAt = process.hrtime.bigint();
  await batch();
  const ms = Number(process.hrtime.bigint() - startedAt) / 1e6;
  return { workflowTasks, perWorkflowTaskMs: ms / (REPLAYS * workflowTasks) };
}

async function main(): Promise<void> {
  const temporal = await startBenchTemporal(args['temporal-address']);
  const connection = await NativeConnection.connect({ address: temporal.address });
  const client = new Client({ connection: await Connection.connect({ address: temporal.address }) });
  const taskQueue = `floor-${process.pid}`;
  const { code } = await bundleWorkflowCode({ workflowsPath: require.resolve('./floor/workflows'), logger: quiet });
  const worker = await Worker.create({
    connection,
    taskQueue,
    workflowBundle: { code },
    activities: { noop: async () => 1 },
  });
  const running = worker.run();
  const runs: { wallMs: number; workflowTasks: number; workflowTasksMs: number }[] = [];
  try {
    for (let run = 0; run <= RUNS; run += 1) {
      const startedAt = Date.now();
      const handle = await client.workflow.start('sequentialNoops', {
        taskQueue,
        workflowId: `floor-${process.pid}-${run}`,
        args: [STEPS],
      });
      await handle.result();
      const wallMs = Date.now() - startedAt;
      const b = historyBreakdown(await handle.fetchHistory(), startedAt, startedAt + wallMs);
      // Run 0 warms the worker (first workflow task, JIT) and is not counted.
      if (run > 0) {
        runs.push({ wallMs, workflowTasks: b.workflowTasks, workflowTasksMs: b.workflowTasksMs });
      }
    }
  } finally {
    worker.shutdown();
    await running;
    await connection.close();
    await temporal.stop();
  }
  const replay = await replayPromotionMs();
  const col = (f: (r: (typeof runs)[number]) => number) => {
    const values = runs.map(f);
    return [fmt(median(values), 1), fmt(Math.min(...values), 1), fmt(Math.max(...values), 1)];
  };
  printTable(
    `floor: ${RUNS} runs of a workflow with ${STEPS} sequential no-op activities (ms)`,
    ['figure', 'median', 'min', 'max'],
    [
      ['start request -> result', ...col((r) => r.wallMs)],
      ['workflow tasks (count)', ...col((r) => r.workflowTasks)],
      ['workflow tasks (sum)', ...col((r) => r.workflowTasksMs)],
      ['per workflow task', ...col((r) => r.workflowTasksMs / Math.max(1, r.workflowTasks))],
      [
        `Haru's promotion code per workflow task (replay, ${replay.workflowTasks} tasks x ${REPLAYS})`,
        fmt(replay.perWorkflowTaskMs, 1),
        '',
        '',
      ],
    ],
  );
  const file = writeResult('floor', { options: { runs: RUNS, steps: STEPS }, runs, replay });
  process.stdout.write(`\nwritten: ${file}\n`);
}

main().then(
  () => process.exit(0),
  (err: unknown) => {
    process.stderr.write(`bench:floor failed: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
    process.exit(1);
  },
);
