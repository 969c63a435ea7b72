/**
 * Failover benchmark: two simulated domains (real processes), Haru's API and worker with production
 * defaults, a steady OpenAI SDK load (streaming and not) through the proxy; the active domain is SIGKILLed
 * and the monitor promotes the standby. Repeated `--runs` times; prints medians and writes JSON.
 *
 *   npm run bench:failover -- [--runs 5] [--wake-delay-ms 2000] [--models 1] [--concurrency 4]
 *
 * Figures per run: detection (kill -> the monitor's promote decision), each promotion step, kill -> commit,
 * kill -> first answer from the new active, client-visible errors, the requests in flight at the kill and how
 * each ended (completed with the uninterrupted text, completed otherwise, failed), the API's migration
 * counters, extra latency of held requests, and the orchestration overhead: decision -> commit minus the simulator's own delays (trainer exit, wake, probe).
 */
import path from 'node:path';
import { parseArgs } from 'node:util';
import { failoverRun, type FailoverBenchContext, PROMOTION_STEPS, type RunFigures } from './support/failover-run';
import { printTable, writeResult } from './support/report';
import { startBenchStack } from './support/stack';
import { fmt, median } from './support/stats';

const { values: args } = parseArgs({
  options: {
    runs: { type: 'string', default: '5' },
    'wake-delay-ms': { type: 'string', default: '2000' },
    models: { type: 'string', default: '1' },
    concurrency: { type: 'string', default: '4' },
    'max-tokens': { type: 'string', default: '16' },
    timeline: { type: 'boolean', default: false },
  },
});
const RUNS = Number(args.runs);
const WAKE_DELAY_MS = Number(args['wake-delay-ms']);
const MODELS = Number(args.models);
const CONCURRENCY = Number(args.concurrency);
const MAX_TOKENS = Number(args['max-tokens']);

async function main(): Promise<void> {
  const stack = await startBenchStack();
  const ctx: FailoverBenchContext = { address: stack.temporal.address, client: stack.client, bundle: stack.bundle };
  const runs: RunFigures[] = [];
  try {
    for (let i = 1; i <= RUNS; i += 1) {
      const r = await failoverRun(i, ctx, {
        wakeDelayMs: WAKE_DELAY_MS,
        models: MODELS,
        concurrency: CONCURRENCY,
        maxTokens: MAX_TOKENS,
        answersBefore: 40,
        answersAfter: 40,
        nvidiaSmiReads: 5,
        shouldPrintTimeline: args.timeline,
      });
      runs.push(r);
      process.stdout.write(
        `run ${i}/${RUNS}: detection ${r.detectionMs} ms, decision->commit ${r.decisionToCommitMs} ms, ` +
          `overhead ${r.overheadMs} ms, errors ${r.clientErrors}, held ${r.heldRequests}, ` +
          `in flight at kill ${JSON.stringify(r.inFlightAtKill)}, migrations ${JSON.stringify(r.migrations)}\n`,
      );
    }
  } finally {
    await stack.stop();
  }
  const sumOf = (counters: Record<string, number>, match: string) =>
    Object.entries(counters)
      .filter(([k]) => k.includes(match))
      .reduce((n, [, v]) => n + v, 0);
  const migrated = (r: RunFigures, outcome: string) => sumOf(r.migrations, `outcome="${outcome}"`);
  const col = (f: (r: RunFigures) => number | null) => [
    fmt(median(runs.map(f))),
    fmt(Math.min(...runs.map((r) => f(r) ?? Infinity))),
    fmt(Math.max(...runs.map((r) => f(r) ?? -Infinity))),
  ];
  const rows: [string, (r: RunFigures) => number | null][] = [
    ['detection (kill -> promote decision)', (r) => r.detectionMs],
    ...PROMOTION_STEPS.map(
      (s) => [`step ${s}`, (r: RunFigures) => r.steps[s] ?? null] as [string, (r: RunFigures) => number | null],
    ),
    ['decision -> routing committed', (r) => r.decisionToCommitMs],
    ['kill -> routing committed', (r) => r.killToCommitMs],
    ['kill -> first answer from new active', (r) => r.killToFirstNewActiveMs],
    ['simulator: trainer exit', (r) => r.simDelaysMs.trainerExit],
    ['simulator: wake', (r) => r.simDelaysMs.wake],
    ['simulator: probe', (r) => r.simDelaysMs.probe],
    ['simulator: nvidia-smi read', (r) => r.simDelaysMs.nvidiaSmi],
    ['orchestration overhead', (r) => r.overheadMs],
    ['overhead without nvidia-smi', (r) => r.overheadWithoutSmiMs],
    ['  of which: monitor -> workflow start', (r) => r.breakdown.startMs],
    ['  of which: workflow tasks (sum)', (r) => r.breakdown.workflowTasksMs],
    ['  workflow tasks (count)', (r) => r.breakdown.workflowTasks],
    ['  of which: bookkeeping activities (sum)', (r) => r.breakdown.bookkeepingMs],
    ['  bookkeeping activities (count)', (r) => r.breakdown.bookkeepingActivities],
    ['  step activities incl. simulator (sum)', (r) => r.breakdown.stepActivitiesMs],
    ['held requests (count)', (r) => r.heldRequests],
    ['held extra latency p50', (r) => r.heldExtraMs.p50],
    ['held extra latency p99', (r) => r.heldExtraMs.p99],
    ['held extra latency max', (r) => r.heldExtraMs.max],
    ['client-visible errors (arrived after kill)', (r) => r.clientErrors],
    ['in flight at kill: streams', (r) => r.inFlightAtKill.streams],
    ['in flight at kill: non-streaming', (r) => r.inFlightAtKill.json],
    ['in flight at kill: completed with the uninterrupted text', (r) => r.inFlightAtKill.intact],
    ['in flight at kill: completed with other text', (r) => r.inFlightAtKill.altered],
    ['errors of requests in flight at kill', (r) => r.inFlightAtKillErrors],
    ['resends attempted (API)', (r) => migrated(r, 'attempted')],
    ['resends succeeded (API)', (r) => migrated(r, 'succeeded')],
    ['resends failed (API)', (r) => migrated(r, 'failed')],
    ['resends refused (API)', (r) => sumOf(r.migrations, 'resend_refusals_total')],
    ['requests sent', (r) => r.requests],
  ];
  printTable(
    `failover: ${RUNS} runs, wake delay ${WAKE_DELAY_MS} ms, ${MODELS} model(s), ${CONCURRENCY} concurrent clients (ms unless counted)`,
    ['figure', 'median', 'min', 'max'],
    rows.map(([name, f]) => [name, ...col(f)]),
  );
  const file = writeResult('failover', {
    options: {
      runs: RUNS,
      wakeDelayMs: WAKE_DELAY_MS,
      models: MODELS,
      concurrency: CONCURRENCY,
      maxTokens: MAX_TOKENS,
    },
    medians: Object.fromEntries(rows.map(([name, f]) => [name, median(runs.map(f))])),
    runs,
  });
  process.stdout.write(`\nwritten: ${path.relative(process.cwd(), file)}\n`);
}

main().then(
  () => process.exit(0),
  (err: unknown) => {
    process.stderr.write(`bench:failover failed: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
    process.exit(1);
  },
);
