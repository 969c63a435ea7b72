/**
 * `npm run bench:guard`: the headline figures in under a minute, each beside its committed baseline
 * (bench/baseline.json): a one-fleet failover (`bench:failover`'s run: kill -> decision -> commit -> first
 * answer from the new active), the supervisor's status read (`bench:step-parts`) and the proxy's CPU per
 * request beside a bare Node forwarder's in the same run (`bench:proxy`, `bench:proxy-ab`).
 *
 *   npm run bench:guard                                     # prints value, baseline, ratio; exit 0
 *   npm run bench:guard -- --strict                         # exit 1 when a figure is worse than its band
 *   npm run bench:guard -- --update-baseline [--runs 3]     # rewrites the baseline (best of the runs)
 *
 * Writes bench/results/guard-<timestamp>.json. Bands: bench/support/guard-figures.ts.
 */
import { execFileSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import type { SimDomain } from '../sim/domain';
import { type FailoverBenchContext, type FailoverFleet, startFailoverFleet } from './support/failover-fleet';
import { failoverOn, type FailoverRunOptions } from './support/failover-run';
import {
  type Baseline,
  baselineFrom,
  baselineSchema,
  bestRunIndex,
  type Comparison,
  compareAll,
  exitCode,
} from './support/guard-compare';
import { GUARD_FIGURES as F, GUARD_SPECS } from './support/guard-figures';
import { type ProxyCpuBench, startProxyCpuBench } from './support/proxy-cpu';
import { machine, printTable, writeResult } from './support/report';
import { startBenchStack } from './support/stack';
import { fmt, median } from './support/stats';
import { startStandbyHost, timeSupervisorParts } from './support/supervisor-parts';

const { values: args } = parseArgs({
  options: {
    strict: { type: 'boolean', default: false },
    'update-baseline': { type: 'boolean', default: false },
    runs: { type: 'string', default: '1' },
  },
});
const RUNS = Number(args.runs);
if (!Number.isInteger(RUNS) || RUNS < 1) throw new Error('--runs must be a positive integer');
const BASELINE_FILE = path.resolve(__dirname, 'baseline.json');
const COMMAND = ['npm run bench:guard', ...(process.argv.length > 2 ? ['--', ...process.argv.slice(2)] : [])].join(' ');

type Figures = Record<string, number>;
/** Wall time of each part of a run (ms), printed so a slow guard says where its minute went. */
type Phases = Record<string, number>;

const FAILOVER: Omit<FailoverRunOptions, 'onPhase'> = {
  wakeDelayMs: 2_000, // bench:failover's default, so the figures read as in docs/performance.md
  models: 1,
  concurrency: 4,
  maxTokens: 16,
  answersBefore: 8,
  answersAfter: 4,
  nvidiaSmiReads: 0,
  shouldPrintTimeline: false,
};
const STATUS_ROUNDS = 4;
const PROXY = { rounds: 3, durationS: 2, connections: 16 };

/** Resolves every promise; throws the first rejection after stopping what the others started. */
async function allStarted<T extends readonly unknown[]>(
  starts: { [K in keyof T]: Promise<T[K]> },
  stopOf: (started: unknown) => Promise<unknown>,
): Promise<T> {
  const settled = await Promise.allSettled(starts);
  const failed = settled.find((s) => s.status === 'rejected');
  if (!failed) return settled.map((s) => (s as PromiseFulfilledResult<unknown>).value) as unknown as T;
  await Promise.all(settled.map((s) => (s.status === 'fulfilled' ? stopOf(s.value) : undefined)));
  throw failed.reason;
}

/**
 * One run: the three benches' processes start at once (nothing is measured while they start), then each
 * is measured alone so none takes CPU from another, then all stop at once.
 */
async function measure(run: number, ctx: Promise<FailoverBenchContext>): Promise<{ figures: Figures; phases: Phases }> {
  const phases: Phases = {};
  let at = Date.now();
  const lap = (name: string) => {
    phases[name] = Date.now() - at;
    at = Date.now();
  };
  const timedStart = <T>(name: string, started: Promise<T>) =>
    started.then((value) => {
      phases[name] = Date.now() - at;
      return value;
    });
  const stateDir = mkdtempSync(path.join(os.tmpdir(), 'haru-bench-guard-'));
  const [fleet, host, proxyBench] = await allStarted<[FailoverFleet, SimDomain, ProxyCpuBench]>(
    [
      startFailoverFleet(run, ctx, { ...FAILOVER, onPhase: (name, ms) => (phases[`failover start: ${name}`] = ms) }),
      timedStart('standby host ready', startStandbyHost(stateDir)),
      timedStart('proxy bench ready', startProxyCpuBench()),
    ],
    (started) => (started as { stop(): Promise<void> }).stop(),
  ).catch((err: unknown) => {
    rmSync(stateDir, { recursive: true, force: true });
    throw err;
  });
  lap('start');
  try {
    const failover = await failoverOn(fleet, { ...FAILOVER, onPhase: (name, ms) => (phases[`failover ${name}`] = ms) });
    at = Date.now();
    const parts = await timeSupervisorParts(host, STATUS_ROUNDS);
    lap('status reads');
    const proxy = await proxyBench.measure(PROXY);
    lap('proxy CPU');
    return {
      phases,
      figures: {
        [F.detection.figure]: failover.detectionMs,
        [F.decisionToCommit.figure]: failover.decisionToCommitMs,
        [F.killToFirstAnswer.figure]: failover.killToFirstNewActiveMs ?? Number.NaN,
        [F.overhead.figure]: failover.overheadMs,
        [F.statusAsleep.figure]: median(parts['status read (models asleep)']!)!,
        [F.statusAwake.figure]: median(parts['status read (models awake)']!)!,
        [F.proxyCpu.figure]: proxy.haruMs,
        [F.bareNodeCpu.figure]: proxy.bareNodeMs,
        [F.proxyCpuOverBareNode.figure]: proxy.haruMs / proxy.bareNodeMs,
      },
    };
  } finally {
    at = Date.now();
    await Promise.all([fleet.stop(), host.stop(), proxyBench.stop()]);
    rmSync(stateDir, { recursive: true, force: true });
    lap('stop');
  }
}

function readBaseline(): Baseline {
  if (!existsSync(BASELINE_FILE)) return { note: 'none recorded', figures: [] };
  return baselineSchema.parse(JSON.parse(readFileSync(BASELINE_FILE, 'utf8')));
}

function printComparisons(comparisons: Comparison[], runs: Figures[]): void {
  const digits = (unit: string, v: number) => (unit === 'x' || v < 10 ? 3 : 0);
  const verdict = (c: Comparison) => {
    if (c.ratio === null) return 'no baseline';
    if (!c.isGated) return 'yardstick';
    return c.isWorse ? `WORSE (band +${Math.round(c.band * 100)} %)` : `ok (band +${Math.round(c.band * 100)} %)`;
  };
  const spread = (figure: string) => {
    const xs = runs.map((r) => r[figure]!);
    return `${fmt(Math.min(...xs), digits('', Math.min(...xs)))}-${fmt(Math.max(...xs), digits('', Math.max(...xs)))}`;
  };
  printTable(
    `bench:guard against ${path.relative(process.cwd(), BASELINE_FILE)}`,
    ['figure', 'unit', 'value', 'baseline', 'ratio', ...(runs.length > 1 ? ['runs'] : []), 'verdict'],
    comparisons.map((c) => [
      c.figure,
      c.unit,
      fmt(c.value, digits(c.unit, c.value)),
      c.baseline === null ? '-' : fmt(c.baseline, digits(c.unit, c.baseline)),
      c.ratio === null ? '-' : fmt(c.ratio, 2),
      ...(runs.length > 1 ? [spread(c.figure)] : []),
      verdict(c),
    ]),
  );
}

function machineDescription(): string {
  const m = machine();
  return `${m.cpus} vCPU ${m.cpuModel}, ${m.memoryGiB} GiB, Node ${m.node}, ${m.platform}`;
}

async function main(): Promise<number> {
  const startedAt = Date.now();
  const loadAtStart = os.loadavg()[0]!;
  const starting = startBenchStack();
  const ctx = starting.then((s) => ({ address: s.temporal.address, client: s.client, bundle: s.bundle }));
  const phases: Phases[] = [];
  const runs: Figures[] = [];
  try {
    for (let i = 1; i <= RUNS; i += 1) {
      const runStartedAt = Date.now();
      const r = await measure(i, ctx);
      runs.push(r.figures);
      phases.push(r.phases);
      process.stdout.write(
        `run ${i}/${RUNS} (${fmt((Date.now() - runStartedAt) / 1000, 1)} s): ` +
          `${Object.entries(r.figures)
            .map(([k, v]) => `${k} ${fmt(v, v < 10 ? 3 : 0)}`)
            .join(', ')}\n`,
      );
    }
  } finally {
    await (await starting.catch(() => null))?.stop();
  }
  const best = RUNS > 1 ? bestRunIndex(GUARD_SPECS, runs) : 0;
  const measured = runs[best]!;
  const comparisons = compareAll(GUARD_SPECS, measured, readBaseline());
  printComparisons(comparisons, runs);
  for (const [i, p] of phases.entries()) {
    process.stdout.write(
      `run ${i + 1} (s): ${Object.entries(p)
        .map(([k, ms]) => `${k} ${fmt(ms / 1000, 1)}`)
        .join(', ')}\n`,
    );
  }
  const file = writeResult('guard', {
    options: { runs: RUNS, strict: args.strict },
    bestRun: best,
    comparisons,
    runs,
    phases,
  });
  process.stdout.write(`written: ${path.relative(process.cwd(), file)}\n`);
  if (args['update-baseline']) {
    const baseline = baselineFrom(GUARD_SPECS, measured, {
      date: new Date().toISOString().slice(0, 10),
      commit: execFileSync('git', ['rev-parse', '--short', 'HEAD'], { encoding: 'utf8' }).trim(),
      command: COMMAND,
      machine: machineDescription(),
      note:
        `${RUNS > 1 ? `best of ${RUNS} runs (lowest geometric mean of the gated figures relative to the runs' medians)` : 'one run'}` +
        `; 1-minute load average ${loadAtStart.toFixed(1)} at the start, ${os.loadavg()[0]!.toFixed(1)} at the end`,
    });
    writeFileSync(BASELINE_FILE, `${JSON.stringify(baseline, null, 2)}\n`);
    process.stdout.write(`baseline rewritten: ${path.relative(process.cwd(), BASELINE_FILE)}\n`);
  }
  const worse = comparisons.filter((c) => c.isWorse).map((c) => c.figure);
  process.stdout.write(
    `${worse.length ? `worse than the baseline: ${worse.join('; ')}` : 'no figure worse than its baseline'}` +
      `${worse.length && !args.strict ? ' (exit 0 without --strict)' : ''}\n` +
      `bench:guard took ${fmt((Date.now() - startedAt) / 1000, 1)} s\n`,
  );
  return exitCode(comparisons, args.strict);
}

main().then(
  (code) => process.exit(code),
  (err: unknown) => {
    process.stderr.write(`bench:guard failed: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
    process.exit(2);
  },
);
