/**
 * The fleets' watch outside Temporal: the `watchShard` activity of every watch shard run in this process
 * through the SDK's MockActivityEnvironment, against simulated hosts in processes of their own
 * (bench/support/sim-host.ts) and a fresh Postgres database. What a poll costs Haru's own code (the shard's
 * read, the supervisor call, judging and recording the poll, the monitors' signals, here counted and dropped)
 * with no worker, bridge or server around it: the difference to `bench:scale`'s worker figure is Temporal's
 * share. Prints polls per second, CPU per poll of this process and of the simulated hosts, and the latency of
 * the supervisors' `/v1/status` answers as the watch saw them.
 *
 *   npm run bench:watch -- [--fleets 10] [--shards 8] [--sim-processes 1] [--seconds 10] [--without-training]
 */
import { mkdtempSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { MockActivityEnvironment } from '@temporalio/testing';
import { createFleetMonitorActivities } from '../activities/fleet-monitor';
import { createSupervisorClient, type SupervisorClient } from '../activities/supervisor-client';
import { createTestDatabase, seedLayout } from '../db/testing';
import { fleetLayoutSchema, type FleetLayout } from '../schemas/layout';
import { twoDomainLayout } from '../test/support/sim-layout';
import { DEFAULT_WATCH_SHARDS } from '../core/watch-shard';
import { createWorkerMetrics } from '../workers/metrics';
import { cpuMs, databaseCpuSince } from './support/cpu';
import { printTable, writeResult } from './support/report';
import { startSimHostProcess } from './support/sim-host';
import { percentile } from './support/stats';

const { values: args } = parseArgs({
  options: {
    fleets: { type: 'string', default: '10' },
    /** Watch shards the fleets are dealt over (HARU_MONITOR_SHARDS). */
    shards: { type: 'string', default: String(DEFAULT_WATCH_SHARDS) },
    'sim-processes': { type: 'string', default: '1' },
    /** Length of the sample, after a warm-up of 3 s. */
    seconds: { type: 'string', default: '10' },
    'without-training': { type: 'boolean', default: false },
  },
});
const FLEETS = Number(args.fleets);
const SHARDS = Number(args.shards);
const SIM_PROCESSES = Number(args['sim-processes']);
const SAMPLE_MS = Number(args.seconds) * 1000;
const WARM_UP_MS = 3_000;

async function layouts(stateDir: string): Promise<FleetLayout[]> {
  const out: FleetLayout[] = [];
  for (let i = 0; i < FLEETS; i += 1) {
    const layout = await twoDomainLayout({
      slug: `watch-${i}`,
      model: 'watch-model',
      stateDir: path.join(stateDir, `f${i}`),
      servingPath: '/v1',
      withTraining: !args['without-training'],
      policy: { autoFailover: false },
    });
    out.push(fleetLayoutSchema.parse(layout));
  }
  return out;
}

async function main(): Promise<void> {
  const stateDir = mkdtempSync(path.join(os.tmpdir(), 'haru-bench-watch-'));
  const fleetLayouts = await layouts(stateDir);
  const hosts = await Promise.all(
    Array.from({ length: Math.min(SIM_PROCESSES, FLEETS) }, (_, i) =>
      startSimHostProcess({
        layouts: fleetLayouts.filter((_l, j) => j % SIM_PROCESSES === i),
        stateDir,
        standby: (_f, d) => d === 'west',
      }),
    ),
  );
  const hostsCpuMs = () => hosts.reduce((sum, h) => sum + cpuMs(h.pid), 0);
  const db = await createTestDatabase({ max: 10 });
  try {
    for (const layout of fleetLayouts) {
      const { fleetId } = await seedLayout(db.store, layout);
      const snapshot = (await db.store.fleets.snapshot(fleetId))!;
      for (const d of snapshot.domains) await db.store.domains.transition(d.id, 'ready');
    }
    // The supervisor client as the worker builds it, timed per status read.
    const client = createSupervisorClient();
    const latenciesMs: number[] = [];
    let isSampling = false;
    const supervisor: SupervisorClient = {
      ...client,
      async status(target, opts) {
        const startedAt = performance.now();
        try {
          return await client.status(target, opts);
        } finally {
          if (isSampling) latenciesMs.push(performance.now() - startedAt);
        }
      },
    };
    let polls = 0;
    let signals = 0;
    const metrics = createWorkerMetrics();
    const activities = createFleetMonitorActivities({
      store: db.store,
      supervisor,
      now: () => new Date(),
      watchShards: SHARDS,
      observeFleet: async () => void (signals += 1),
      metrics: {
        ...metrics,
        domainPolled: (labels) => {
          polls += 1;
          metrics.domainPolled(labels);
        },
      },
    });
    // Each shard's watch returns at its checkpoint, after the sample.
    const checkpointMs = WARM_UP_MS + SAMPLE_MS + 2_000;
    const watches = Array.from({ length: SHARDS }, (_, shard) =>
      new MockActivityEnvironment({ heartbeatTimeoutMs: 5_000 }).run(activities.watchShard, {
        shard,
        shards: SHARDS,
        checkpointMs,
      }),
    );
    // A watch that fails is reported at the end, not as an unhandled rejection meanwhile.
    const ended = Promise.allSettled(watches);
    await new Promise((resolve) => setTimeout(resolve, WARM_UP_MS));
    isSampling = true;
    const postgresCpu = await databaseCpuSince(db.database.db);
    const from = { polls, signals, cpu: process.cpuUsage(), hosts: hostsCpuMs(), at: Date.now() };
    await new Promise((resolve) => setTimeout(resolve, SAMPLE_MS));
    isSampling = false;
    const cpu = process.cpuUsage(from.cpu);
    const seconds = (Date.now() - from.at) / 1000;
    const sampled = polls - from.polls;
    const figures = {
      fleets: FLEETS,
      shards: SHARDS,
      signalsPerSecond: (signals - from.signals) / seconds,
      pollsPerSecond: sampled / seconds,
      expectedPollsPerSecond: FLEETS * 4,
      watchCpuMsPerPoll: (cpu.user + cpu.system) / 1000 / sampled,
      postgresCpuMsPerPoll: (await postgresCpu()) / sampled,
      simHostCpuMsPerPoll: (hostsCpuMs() - from.hosts) / sampled,
      statusLatencyMs: {
        p50: percentile(latenciesMs, 50),
        p90: percentile(latenciesMs, 90),
        p99: percentile(latenciesMs, 99),
      },
      loadAverage: os.loadavg(),
    };
    for (const outcome of await ended) {
      if (outcome.status === 'rejected') throw outcome.reason;
    }
    printTable(
      'watch: every fleet watched in this process, outside Temporal (ms unless noted)',
      [
        'fleets',
        'shards',
        'polls/s (expected)',
        'signals/s',
        'watch CPU ms/poll',
        'Postgres CPU ms/poll',
        'sim host CPU ms/poll',
        'status latency p50 / p90 / p99',
      ],
      [
        [
          String(FLEETS),
          String(SHARDS),
          `${figures.pollsPerSecond.toFixed(1)} (${figures.expectedPollsPerSecond})`,
          figures.signalsPerSecond.toFixed(1),
          figures.watchCpuMsPerPoll.toFixed(2),
          figures.postgresCpuMsPerPoll.toFixed(2),
          figures.simHostCpuMsPerPoll.toFixed(2),
          [figures.statusLatencyMs.p50, figures.statusLatencyMs.p90, figures.statusLatencyMs.p99]
            .map((v) => (v === null ? '-' : v.toFixed(1)))
            .join(' / '),
        ],
      ],
    );
    const file = writeResult('watch', {
      options: { fleets: FLEETS, shards: SHARDS, simProcesses: SIM_PROCESSES, seconds: SAMPLE_MS / 1000 },
      results: [figures],
    });
    process.stdout.write(`\nwritten: ${path.relative(process.cwd(), file)}\n`);
  } finally {
    await db.drop();
    await Promise.all(hosts.map((h) => h.stop()));
  }
}

main().then(
  () => process.exit(0),
  (err: unknown) => {
    process.stderr.write(`${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
    process.exit(1);
  },
);
