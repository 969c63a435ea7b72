/**
 * Scale benchmark: 1, 10 and 100 fleets, each with two simulated domains at zero delay, all promoting at
 * once on one `haru worker` process (which also runs every fleet's monitor, as in production). Reports wall
 * time, promotions per second, p50/p99 promotion time (request -> routing committed, and -> workflow done
 * including the old active's demotion) and the worker's peak memory. Before the promotions, once every monitor
 * has polled, a sample of the idle machine (`--idle-seconds`, 10 s): supervisor polls per second (per worker, and how many the
 * policy expects) and the CPU of the workers, the database's Postgres backends, Temporal and the simulated
 * hosts, in total, per poll and per fleet and second; the control plane's figure (workers + Postgres +
 * Temporal) leaves the simulated hosts out.
 *
 *   npm run bench:scale -- [--fleets 1,10,100] [--without-monitors] [--workers 1] [--heartbeat-ms 500]
 *                          [--sim-process] [--sim-processes N] [--idle-only] [--split-tiers]
 *                          [--without-training] [--idle-seconds 10]
 *                          [--region-death] [--killed-share 1] [--client-every-ms 1000]
 *
 * `--region-death` (bench/support/region-death.ts): instead of requested promotions, auto-failover on and a
 * client per fleet sending through `haru api`'s proxy, the actives of `--killed-share` of the fleets (all by
 * default) die at once (their sim host processes SIGKILLed with `--sim-process`); reports, per killed fleet and
 * as p50/p99, kill -> decision, -> commit, -> first answer from the new active, client errors after the kill,
 * healthy domains marked failed, and the control plane's CPU and the workers' event-loop lag meanwhile.
 *
 * The simulated domains of all fleets live in this process (bench/support/sim-host.ts), or with
 * `--sim-process` in a child process of their own (needed for 1,000 fleets); trainers are real processes.
 * The worker, Temporal and Postgres are separate processes. `--idle-only` stops after the idle sample.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import type { Client, Connection } from '@temporalio/client';
import { createTemporalOrchestrator } from '../api/orchestrator';
import { createTestDatabase, seedLayout } from '../db/testing';
import { fleetLayoutSchema, type FleetLayout } from '../schemas/layout';
import { defaultFleetPolicy } from '../schemas/policy';
import { parsePrometheusText, sumSamples } from '../supervisor/prometheus-text';
import { freePort } from '../test/support/ports';
import { twoDomainLayout } from '../test/support/sim-layout';
import { demotionChildWorkflowId, healthQuery, monitorWorkflowId, progressQuery } from '../workflows/definitions';
import { cpuMs, databaseCpuSince } from './support/cpu';
import { printTimeline } from './support/history';
import { type HaruProcess, startHaruProcess } from './support/processes';
import { printTable, writeResult } from './support/report';
import { runRegionDeath, type RegionDeathRun } from './support/region-death';
import type { RegionFleet } from './support/region-death-figures';
import { type SimHost, startSimHost, startSimHostProcess } from './support/sim-host';
import { startBenchStack } from './support/stack';
import { eventually } from '../test/support/eventually';
import { fmt, percentile } from './support/stats';

const { values: args } = parseArgs({
  options: {
    fleets: { type: 'string', default: '1,10,100' },
    'without-monitors': { type: 'boolean', default: false },
    /** Write a V8 CPU profile of the worker process here. */
    'profile-dir': { type: 'string' },
    /** Print the Temporal history of the slowest promotion of each size. */
    timeline: { type: 'boolean', default: false },
    /**
     * `haru worker` processes on the task queues. With more than one, the watch shards (and the monitors'
     * decisions, the promotions' steps) go to whichever worker polls their task: the idle figures say how the
     * polls divided.
     */
    workers: { type: 'string', default: '1' },
    /** The fleets' monitor poll interval (policy `heartbeatIntervalMs`; the default policy says 500). */
    'heartbeat-ms': { type: 'string' },
    /** Run the simulated hosts in a process of their own rather than in this one. */
    'sim-process': { type: 'boolean', default: false },
    /**
     * With `--sim-process`: how many such processes share the fleets (default 1). One process answers a
     * status read in about 3 ms of its CPU, so at 100 fleets and 500 ms (400 reads/s) one is the bound.
     */
    'sim-processes': { type: 'string', default: '1' },
    /**
     * The tiers as processes of their own (HARU_WORKER_QUEUES): `--workers` monitors-only workers and one
     * operations-only worker beside them.
     */
    'split-tiers': { type: 'boolean', default: false },
    /**
     * Domains without a training slot (standbys only asleep): 1,000 fleets' real trainers (~43 MiB resident
     * each) do not fit this machine's memory.
     */
    'without-training': { type: 'boolean', default: false },
    /** Measure the idle machine only: no promotions. */
    'idle-only': { type: 'boolean', default: false },
    /** Length of the idle sample (seconds). */
    'idle-seconds': { type: 'string', default: '10' },
    /** Kill the actives' hosts instead of requesting promotions: the monitors fail the fleets over. */
    'region-death': { type: 'boolean', default: false },
    /** With `--region-death`: the share of the fleets whose active dies (the first ones); the rest keep serving. */
    'killed-share': { type: 'string', default: '1' },
    /** With `--region-death`: each fleet's client sends a request this often (ms). */
    'client-every-ms': { type: 'string', default: '1000' },
  },
});
const WORKER_COUNT = Number(args.workers);
const HEARTBEAT_MS = args['heartbeat-ms'] ? Number(args['heartbeat-ms']) : undefined;
const FLEET_COUNTS = args.fleets.split(',').map(Number);
const IDLE_SAMPLE_MS = Number(args['idle-seconds']) * 1000;
const SIM_PROCESSES = Number(args['sim-processes']);
const REGION_DEATH = args['region-death'];
const MODEL = 'scale-model';

interface ScaleFigures {
  fleets: number;
  wallMs: number;
  promotionsPerSecond: number;
  toCommitMs: { p50: number | null; p99: number | null; max: number | null };
  toDoneMs: { p50: number | null; p99: number | null; max: number | null };
  failed: number;
  /** `step: code: message` of every failed promotion. */
  failures: string[];
  workerRssBeforeMiB: number | null;
  workerPeakRssMiB: number | null;
  /** The worker's CPU use before the promotions (monitors polling), in % of one core. */
  workerIdleCpuPercent: number;
  /** Before the promotions: supervisor polls per second (all workers) and what each costs, in CPU ms. */
  idle: {
    pollsPerSecond: number;
    /** What the fleets' policy asks for: two domains per fleet, one poll each per poll interval. */
    expectedPollsPerSecond: number;
    /** CPU ms per fleet and second: the control plane (workers + Postgres + Temporal), and the simulated hosts. */
    cpuMsPerFleetSecond: { controlPlane: number; simHost: number };
    /** `uptime`'s load averages (1, 5, 15 min) at the end of the sample: the machine is shared. */
    loadAverage: number[];
    /** The share of those polls each worker made (the monitors' activities spread over the workers). */
    pollsPerWorker: number[];
    /** Activity attempts during the sample, by type, all workers (the shards' watches run on through it). */
    activities: Record<string, number>;
    cpuPercent: { workers: number; postgres: number; temporalServer: number | null; simHost: number };
    cpuMsPerPoll: { workers: number; postgres: number; simHost: number } | null;
  };
  /** Routing commits each worker ran during the promotions (`haru_worker_routing_commits_total`). */
  commitsPerWorker: number[];
  /** Activity attempts during the promotions, by type, all workers (the steps, and what the monitors ran). */
  activitiesDuringPromotions: Record<string, number>;
  /** CPU time per promotion (everything else on the machine counts too: Postgres, trainers, other jobs). */
  cpuPerPromotionMs: { worker: number; temporalServer: number | null; simHostAndBench: number };
  monitors: boolean;
  /** With `--region-death`: what the region's death did (no promotions requested then). */
  regionDeath?: RegionDeathRun;
}

/** A free port not handed out before in this process (the OS may offer a just-released port twice). */
const handedOut = new Set<number>();
async function uniquePort(): Promise<number> {
  for (;;) {
    const port = await freePort();
    if (!handedOut.has(port)) {
      handedOut.add(port);
      return port;
    }
  }
}

/** One reading of a worker's `/metrics`: its polls and commits so far, and its activity attempts by type. */
interface WorkerCounters {
  polls: number;
  commits: number;
  activities: Record<string, number>;
}

/**
 * A worker's counters, from one fetch of its `/metrics` (at 1,000 fleets the text is megabytes: a fetch per
 * counter would stretch the sample they bound).
 */
async function workerCounters(worker: HaruProcess): Promise<WorkerCounters> {
  const samples = parsePrometheusText(await (await fetch(String(worker.ready.metricsUrl))).text());
  const activities: Record<string, number> = {};
  for (const s of samples)
    if (s.name === 'haru_worker_activity_executions_total')
      activities[s.labels.activity!] = (activities[s.labels.activity!] ?? 0) + s.value;
  return {
    polls: sumSamples(samples, 'haru_worker_domain_polls_total') ?? 0,
    commits: sumSamples(samples, 'haru_worker_routing_commits_total') ?? 0,
    activities,
  };
}

/** Every worker's counters, and when they were read (the middle of the fetches). */
async function countersOf(workers: HaruProcess[]): Promise<{ atMs: number; of: WorkerCounters[] }> {
  const startedAtMs = Date.now();
  const of = await Promise.all(workers.map(workerCounters));
  return { atMs: (startedAtMs + Date.now()) / 2, of };
}

/** Activity attempts of every worker between two readings, by type (those that ran). */
function activitiesSince(before: WorkerCounters[], after: WorkerCounters[]): Record<string, number> {
  const out: Record<string, number> = {};
  after.forEach(({ activities }, i) => {
    for (const [activity, n] of Object.entries(activities)) {
      const ran = n - (before[i]?.activities[activity] ?? 0);
      if (ran > 0) out[activity] = (out[activity] ?? 0) + ran;
    }
  });
  return out;
}

/** Supervisor polls so far, summed over the workers. */
const pollCount = async (workers: HaruProcess[]): Promise<number> =>
  (await Promise.all(workers.map(workerCounters))).reduce((sum, c) => sum + c.polls, 0);

/** Node's flags for a V8 CPU profile of a child process under `--profile-dir` (files named by pid). */
const profileArgs = (): string[] =>
  args['profile-dir'] ? ['--cpu-prof', `--cpu-prof-dir=${path.resolve(args['profile-dir'])}`] : [];

async function layouts(count: number, stateDir: string, run: string): Promise<FleetLayout[]> {
  const out: FleetLayout[] = [];
  for (let i = 0; i < count; i += 1) {
    const layout = await twoDomainLayout({
      slug: `scale-${run}-${i}`,
      model: MODEL,
      stateDir: path.join(stateDir, `f${i}`),
      servingPath: '/v1',
      withTraining: !args['without-training'],
      port: uniquePort,
      // Monitors watch but never promote on their own (the benchmark starts every promotion itself), unless
      // a region dies: then finding and failing over the dead actives is theirs.
      policy: {
        autoFailover: REGION_DEATH,
        ...(HEARTBEAT_MS ? { heartbeatIntervalMs: HEARTBEAT_MS, heartbeatStaleMs: 10 * HEARTBEAT_MS } : {}),
      },
    });
    out.push(fleetLayoutSchema.parse(layout));
  }
  return out;
}

/** The figures of an `--idle-only` run: the idle sample, no promotions. */
function idleOnly(
  count: number,
  idle: ScaleFigures['idle'],
  worker: HaruProcess,
  idleCpuShare: number,
  rssBefore: number | null,
): ScaleFigures {
  const none = { p50: null, p99: null, max: null };
  return {
    fleets: count,
    wallMs: 0,
    promotionsPerSecond: 0,
    toCommitMs: none,
    toDoneMs: none,
    failed: 0,
    failures: [],
    commitsPerWorker: [],
    activitiesDuringPromotions: {},
    workerRssBeforeMiB: rssBefore,
    workerPeakRssMiB: worker.peakRssMiB(),
    workerIdleCpuPercent: idleCpuShare * 100,
    idle,
    cpuPerPromotionMs: { worker: 0, temporalServer: null, simHostAndBench: 0 },
    monitors: !args['without-monitors'],
  };
}

async function oneScale(
  count: number,
  temporal: { address: string; pid: number | null },
  { client, connection }: { client: Client; connection: Connection },
  bundle: string,
): Promise<ScaleFigures> {
  const address = temporal.address;
  const run = `${process.pid}-${count}`;
  const stateDir = mkdtempSync(path.join(os.tmpdir(), 'haru-bench-scale-'));
  const db = await createTestDatabase({ max: 10 });
  const cleanups: (() => Promise<unknown>)[] = [() => db.drop()];
  try {
    const fleetLayouts = await layouts(count, stateDir, run);
    const hostOptions = {
      layouts: fleetLayouts,
      stateDir,
      standby: (_f: string, d: string) => d === 'west',
      nodeArgs: profileArgs(),
    };
    // With --region-death the dying actives are hosts of their own, so that killing them kills nothing else.
    const killedCount = REGION_DEATH ? Math.ceil(count * Number(args['killed-share'])) : 0;
    const killedSlugs = new Set(fleetLayouts.slice(0, killedCount).map((l) => l.fleet.slug));
    const inRegion = (f: string, d: string) => d === 'east' && killedSlugs.has(f);
    const groups = REGION_DEATH ? [inRegion, (f: string, d: string) => !inRegion(f, d)] : [undefined];
    // With --sim-process, each group's fleets dealt round-robin over SIM_PROCESSES processes of their own.
    const hostGroups: (SimHost & { pid?: number })[][] = await Promise.all(
      groups.map(async (runs) => {
        const served = runs
          ? fleetLayouts.filter((l) => l.domains.some((d) => runs(l.fleet.slug, d.slug)))
          : fleetLayouts;
        if (!args['sim-process']) return [await startSimHost({ ...hostOptions, layouts: served, runs })];
        return Promise.all(
          Array.from({ length: Math.min(SIM_PROCESSES, served.length) }, (_, i) =>
            startSimHostProcess({ ...hostOptions, layouts: served.filter((_l, j) => j % SIM_PROCESSES === i), runs }),
          ),
        );
      }),
    );
    const hosts = hostGroups.flat();
    cleanups.push(() => Promise.all(hosts.map((h) => h.stop())));
    if (args['profile-dir'])
      for (const h of hosts) if (h.pid !== undefined) process.stdout.write(`sim host: pid ${h.pid}\n`);
    // The simulated hosts' CPU so far: their own processes, or this one (then the benchmark's own work counts too).
    const simCpuMs = () => {
      if (args['sim-process']) return hosts.reduce((sum, h) => sum + cpuMs(h.pid!), 0);
      const own = process.cpuUsage();
      return (own.user + own.system) / 1000;
    };
    const fleets: RegionFleet[] = [];
    for (const layout of fleetLayouts) {
      const { fleetId } = await seedLayout(db.store, layout);
      const snapshot = (await db.store.fleets.snapshot(fleetId))!;
      // Ready from the start (the monitors would get there with their first look; at 100 fleets on two cores
      // that first look alone takes minutes, which is not what this benchmark measures).
      for (const d of snapshot.domains) await db.store.domains.transition(d.id, 'ready');
      fleets.push({
        slug: layout.fleet.slug,
        fleetId,
        eastId: snapshot.domains.find((d) => d.slug === 'east')!.id,
        westId: snapshot.domains.find((d) => d.slug === 'west')!.id,
        isKilled: killedSlugs.has(layout.fleet.slug),
      });
    }
    const taskQueue = `bench-scale-${run}`;
    // Promotions start as the API starts them; the deadline allows for hundreds of starts at once.
    const orchestrator = createTemporalOrchestrator({ client, connection, taskQueue, timeoutMs: 60_000 });
    const tiers: Record<string, string>[] = args['split-tiers']
      ? [
          ...Array.from({ length: WORKER_COUNT }, () => ({ HARU_WORKER_QUEUES: 'monitors' })),
          { HARU_WORKER_QUEUES: 'operations' },
        ]
      : Array.from({ length: WORKER_COUNT }, () => ({}));
    // Started together, so that every worker polls before the shards' first watches are handed out.
    const workers = await Promise.all(
      tiers.map(async (tier) => {
        const worker = await startHaruProcess(
          'worker',
          {
            DATABASE_URL: db.url,
            TEMPORAL_ADDRESS: address,
            HARU_TASK_QUEUE: taskQueue,
            HARU_WORKFLOW_BUNDLE: bundle,
            HARU_WORKER_METRICS_PORT: '0',
            HARU_WORKER_SDK_METRICS_PORT: '0', // off: several workers share this machine
            HARU_WORKER_METRICS_HOST: '127.0.0.1',
            LOG_LEVEL: 'info',
            ...tier,
          },
          'worker running',
          {
            nodeArgs: profileArgs(),
            // The worker is ready once every fleet's monitor is started: a thousand starts take minutes here.
            timeoutMs: 120_000 + 300 * count,
          },
        );
        cleanups.push(() => worker.stop());
        return worker;
      }),
    );
    const worker = workers[0]!;
    const workersCpuMs = () => workers.reduce((sum, w) => sum + cpuMs(w.pid), 0);
    const monitors = fleets.map((f) => client.workflow.getHandle(monitorWorkflowId(f.fleetId)));
    cleanups.push(() => Promise.all(monitors.map((m) => m.terminate('bench over').catch(() => undefined))));
    if (args['without-monitors']) await Promise.all(monitors.map((m) => m.terminate('benchmark without monitors')));
    // The sample starts once every monitor has taken its first look (startup is not what it measures).
    if (!args['without-monitors']) {
      await eventually(
        'a first poll of every domain',
        async () => (await pollCount(workers)) >= 2 * count,
        180_000,
        200,
      );
      for (const monitor of monitors)
        await eventually(
          'every monitor’s first look',
          async () => (await monitor.query(healthQuery)) !== null,
          180_000,
        );
    }
    const rssBefore = worker.peakRssMiB();
    // What the machine spends while nothing promotes: with monitors, that is their polling (worker, the
    // Postgres backends of this database, Temporal, and the simulated hosts answering in this process).
    // The counters first and the CPU right after, at both ends: the sample is the time between the readings.
    const countersFrom = await countersOf(workers);
    const postgresCpu = await databaseCpuSince(db.database.db);
    const idleFrom = {
      worker: cpuMs(worker.pid),
      workers: workersCpuMs(),
      temporal: temporal.pid ? cpuMs(temporal.pid) : 0,
      sim: simCpuMs(),
    };
    await new Promise((r) => setTimeout(r, IDLE_SAMPLE_MS));
    const countersTo = await countersOf(workers);
    const sampleMs = countersTo.atMs - countersFrom.atMs;
    const idleCpuShare = (cpuMs(worker.pid) - idleFrom.worker) / sampleMs;
    const idleCpu = {
      workers: workersCpuMs() - idleFrom.workers,
      temporalServer: temporal.pid ? cpuMs(temporal.pid) - idleFrom.temporal : null,
      simHost: simCpuMs() - idleFrom.sim,
      postgres: await postgresCpu(),
    };
    const pollsPerWorker = countersTo.of.map((c, i) => c.polls - countersFrom.of[i]!.polls);
    const idlePolls = pollsPerWorker.reduce((a, b) => a + b, 0);
    // What ran besides the shards' watches while nothing happened: looks, decisions, repairs (ideally none).
    const idleActivities = activitiesSince(countersFrom.of, countersTo.of);
    const share = (ms: number) => (ms / sampleMs) * 100;
    const perFleetSecond = (ms: number) => ms / count / (sampleMs / 1000);
    const intervalMs = HEARTBEAT_MS ?? defaultFleetPolicy().heartbeatIntervalMs;
    const idle = {
      pollsPerSecond: (idlePolls / sampleMs) * 1000,
      expectedPollsPerSecond: (2 * count * 1000) / intervalMs,
      cpuMsPerFleetSecond: {
        controlPlane: perFleetSecond(idleCpu.workers + idleCpu.postgres + (idleCpu.temporalServer ?? 0)),
        simHost: perFleetSecond(idleCpu.simHost),
      },
      loadAverage: os.loadavg(),
      pollsPerWorker,
      activities: idleActivities,
      cpuPercent: {
        workers: share(idleCpu.workers),
        postgres: share(idleCpu.postgres),
        temporalServer: idleCpu.temporalServer === null ? null : share(idleCpu.temporalServer),
        simHost: share(idleCpu.simHost),
      },
      cpuMsPerPoll:
        idlePolls > 0
          ? {
              workers: idleCpu.workers / idlePolls,
              postgres: idleCpu.postgres / idlePolls,
              simHost: idleCpu.simHost / idlePolls,
            }
          : null,
    };

    if (args['idle-only']) return idleOnly(count, idle, worker, idleCpuShare, rssBefore);
    if (REGION_DEATH) {
      const regionDeath = await runRegionDeath({
        db,
        client,
        temporal,
        taskQueue,
        workers,
        fleets,
        dying: hostGroups[0]!,
        // The surviving hosts and this process (the clients): a killed process's CPU reads 0 once it is gone.
        simAndBenchCpuMs: () =>
          cpuMs(process.pid) + (args['sim-process'] ? hostGroups[1]!.reduce((sum, h) => sum + cpuMs(h.pid!), 0) : 0),
        model: MODEL,
        clientEveryMs: Number(args['client-every-ms']),
        timeline: args.timeline,
      });
      return { ...idleOnly(count, idle, worker, idleCpuShare, rssBefore), regionDeath };
    }

    const countersBefore = await countersOf(workers);
    const commitsBefore = countersBefore.of.map((c) => c.commits);
    const cpuBefore = {
      worker: workersCpuMs(),
      temporal: temporal.pid ? cpuMs(temporal.pid) : 0,
      host: process.cpuUsage(),
    };
    const startedAt = Date.now();
    const results = await Promise.all(
      fleets.map(async ({ fleetId, westId }) => {
        const requestedAt = Date.now();
        const { operation } = await db.store.operations.create({
          fleetId,
          kind: 'promote',
          targetDomainId: westId,
          reason: 'scale benchmark',
          requestedBy: 'bench',
        });
        await orchestrator.startOperation(operation);
        const handle = client.workflow.getHandle(operation.workflowId);
        const ok = await handle.result().then(
          () => true,
          () => false,
        );
        const doneAt = Date.now();
        const error = ok ? null : ((await db.store.operations.get(operation.id))?.error ?? null);
        const progress = await handle.query(progressQuery).catch(() => null);
        const commit = progress?.steps.find((s) => s.step === 'commitRouting')?.finishedAt;
        return {
          ok,
          toDoneMs: doneAt - requestedAt,
          toCommitMs: commit ? Date.parse(commit) - requestedAt : null,
          doneAt,
          requestedAt,
          handle,
          fleetId,
          operationId: operation.id,
          error,
        };
      }),
    );
    const wallMs = Math.max(...results.map((r) => r.doneAt)) - startedAt;
    const countersAfter = await countersOf(workers);
    const commitsPerWorker = countersAfter.of.map((c, i) => c.commits - commitsBefore[i]!);
    const activitiesDuringPromotions = activitiesSince(countersBefore.of, countersAfter.of);
    const hostCpu = process.cpuUsage(cpuBefore.host);
    const cpuPerPromotionMs = {
      worker: (workersCpuMs() - cpuBefore.worker) / count,
      temporalServer: temporal.pid ? (cpuMs(temporal.pid) - cpuBefore.temporal) / count : null,
      simHostAndBench: (hostCpu.user + hostCpu.system) / 1000 / count,
    };
    if (args.timeline) {
      const slowest = results.reduce((a, b) => ((b.toCommitMs ?? 0) > (a.toCommitMs ?? 0) ? b : a));
      printTimeline(
        await slowest.handle.fetchHistory(),
        slowest.requestedAt,
        `slowest of ${count} to commit (ms after its request)`,
      );
      // The slowest to finish: its own history and its old active's demotion (a child workflow).
      const last = results.reduce((a, b) => (b.toDoneMs > a.toDoneMs ? b : a));
      printTimeline(await last.handle.fetchHistory(), last.requestedAt, `slowest of ${count} to finish`);
      // A promotion that failed before its commit started no demotion.
      const child = client.workflow.getHandle(demotionChildWorkflowId(last.fleetId, last.operationId));
      const demotion = await child.fetchHistory().catch(() => null);
      if (demotion) printTimeline(demotion, last.requestedAt, `its demotion of the old active`);
    }
    const commits = results.map((r) => r.toCommitMs).filter((v): v is number => v !== null);
    const done = results.map((r) => r.toDoneMs);
    return {
      fleets: count,
      wallMs,
      promotionsPerSecond: (results.filter((r) => r.ok).length / wallMs) * 1000,
      toCommitMs: { p50: percentile(commits, 50), p99: percentile(commits, 99), max: percentile(commits, 100) },
      toDoneMs: { p50: percentile(done, 50), p99: percentile(done, 99), max: percentile(done, 100) },
      failed: results.filter((r) => !r.ok).length,
      failures: results.flatMap((r) => (r.error ? [`${r.error.step}: ${r.error.code}: ${r.error.message}`] : [])),
      workerRssBeforeMiB: rssBefore,
      workerPeakRssMiB: Math.max(...workers.map((w) => w.peakRssMiB() ?? 0)),
      workerIdleCpuPercent: idleCpuShare * 100,
      idle,
      commitsPerWorker,
      activitiesDuringPromotions,
      cpuPerPromotionMs,
      monitors: !args['without-monitors'],
    };
  } finally {
    for (const fn of cleanups.reverse()) await fn().catch(() => undefined);
    rmSync(stateDir, { recursive: true, force: true });
  }
}

/** The region-death table: one row per fleet count, the killed fleets' figures in ms after the kill. */
function printRegionDeath(all: ScaleFigures[]): void {
  printTable(
    `region death: the actives of ${args['killed-share']} of the fleets killed at once, auto-failover on, a client per fleet every ${args['client-every-ms']} ms; ms after the kill unless noted`,
    [
      'fleets',
      'killed',
      'decision p50',
      'p99',
      'commit p50',
      'p99',
      'first answer p50',
      'p99',
      'max',
      'client errors after kill',
      'in flight failed',
      'not failed over once',
      'healthy marked failed',
      'window',
      'CPU % workers/temporal/api/sim+bench',
      'worker lag max / p99 ms',
      'requests',
    ],
    all.flatMap((f) => {
      const r = f.regionDeath;
      if (!r) return [];
      return [
        [
          f.fleets,
          r.figures.killed.length,
          fmt(r.detectionMs.p50),
          fmt(r.detectionMs.p99),
          fmt(r.commitMs.p50),
          fmt(r.commitMs.p99),
          fmt(r.firstAnswerMs.p50),
          fmt(r.firstAnswerMs.p99),
          fmt(r.firstAnswerMs.max),
          r.clientErrors,
          r.inFlightErrors,
          r.notFailedOverOnce,
          r.figures.healthyMarkedFailed.length,
          fmt(r.windowMs),
          [r.cpuPercent.workers, r.cpuPercent.temporalServer, r.cpuPercent.api, r.cpuPercent.simHostsAndBench]
            .map((v) => fmt(v))
            .join(' / '),
          `${fmt(r.workerLagMs.max)} / ${fmt(r.workerLagMs.p99OfMaxima)}`,
          r.requests,
        ],
      ];
    }),
  );
  for (const f of all)
    for (const line of [
      ...(f.regionDeath?.figures.healthyMarkedFailed.map((h) => `${h.fleet} ${h.domain}: ${h.message}`) ?? []),
      ...(f.regionDeath?.figures.errorSamples ?? []),
    ])
      process.stdout.write(`${f.fleets} fleets: ${line}\n`);
}

async function main(): Promise<void> {
  const { temporal, client, connection, bundle, stop } = await startBenchStack();
  const all: ScaleFigures[] = [];
  try {
    for (const count of FLEET_COUNTS) {
      const f = await oneScale(count, temporal, { client, connection }, bundle);
      all.push(f);
      process.stdout.write(
        `${count} fleets: wall ${f.wallMs} ms, ${fmt(f.promotionsPerSecond, 1)} promotions/s, ` +
          `commit p50 ${f.toCommitMs.p50} p99 ${f.toCommitMs.p99} ms, worker peak ${fmt(f.workerPeakRssMiB)} MiB, failed ${f.failed}, ` +
          `idle polls per worker ${f.idle.pollsPerWorker.join(' / ')}, commits per worker ${f.commitsPerWorker.join(' / ')}, ` +
          `activities during the promotions ${JSON.stringify(f.activitiesDuringPromotions)}\n`,
      );
      process.stdout.write(
        `${count} fleets idle: ${fmt(f.idle.pollsPerSecond)} polls/s (expected ${fmt(f.idle.expectedPollsPerSecond)}), ` +
          `control plane ${fmt(f.idle.cpuMsPerFleetSecond.controlPlane, 2)} CPU ms/fleet/s, sim hosts ` +
          `${fmt(f.idle.cpuMsPerFleetSecond.simHost, 2)}, load ${f.idle.loadAverage.map((l) => l.toFixed(2)).join(' ')}, ` +
          `activities ${JSON.stringify(f.idle.activities)}\n`,
      );
    }
  } finally {
    await stop();
  }
  printTable(
    `scale: every fleet promotes at once on ${WORKER_COUNT} worker(s) (${args['without-monitors'] ? 'monitors stopped' : 'monitors running'}${HEARTBEAT_MS ? `, polls every ${HEARTBEAT_MS} ms` : ''}); ms unless noted`,
    [
      'fleets',
      'wall',
      'promotions/s',
      'commit p50',
      'commit p99',
      'done p50',
      'done p99',
      'failed',
      'worker idle CPU %',
      'idle polls/s (expected)',
      'control-plane CPU ms/fleet/s',
      'idle polls / commits per worker',
      'idle CPU % workers/pg/temporal/host',
      'CPU ms/poll workers/pg/host',
      'worker RSS before MiB',
      'worker peak MiB',
      'CPU ms/promotion: worker',
      'temporal',
      'sim host',
    ],
    all.map((f) => [
      f.fleets,
      fmt(f.wallMs),
      fmt(f.promotionsPerSecond, 1),
      fmt(f.toCommitMs.p50),
      fmt(f.toCommitMs.p99),
      fmt(f.toDoneMs.p50),
      fmt(f.toDoneMs.p99),
      f.failed,
      fmt(f.workerIdleCpuPercent),
      `${fmt(f.idle.pollsPerSecond)} (${fmt(f.idle.expectedPollsPerSecond)})`,
      fmt(f.idle.cpuMsPerFleetSecond.controlPlane, 2),
      `${f.idle.pollsPerWorker.join('+')} / ${f.commitsPerWorker.join('+')}`,
      [
        f.idle.cpuPercent.workers,
        f.idle.cpuPercent.postgres,
        f.idle.cpuPercent.temporalServer,
        f.idle.cpuPercent.simHost,
      ]
        .map((v) => fmt(v))
        .join(' / '),
      f.idle.cpuMsPerPoll
        ? [f.idle.cpuMsPerPoll.workers, f.idle.cpuMsPerPoll.postgres, f.idle.cpuMsPerPoll.simHost]
            .map((v) => fmt(v, 2))
            .join(' / ')
        : '–',
      fmt(f.workerRssBeforeMiB),
      fmt(f.workerPeakRssMiB),
      fmt(f.cpuPerPromotionMs.worker),
      fmt(f.cpuPerPromotionMs.temporalServer),
      fmt(f.cpuPerPromotionMs.simHostAndBench),
    ]),
  );
  if (REGION_DEATH) printRegionDeath(all);
  const file = writeResult('scale', {
    options: {
      fleets: FLEET_COUNTS,
      monitors: !args['without-monitors'],
      workers: WORKER_COUNT,
      heartbeatIntervalMs: HEARTBEAT_MS ?? null,
      simProcess: args['sim-process'],
      simProcesses: args['sim-process'] ? SIM_PROCESSES : 0,
      splitTiers: args['split-tiers'],
      withoutTraining: args['without-training'],
      idleOnly: args['idle-only'],
      idleSeconds: IDLE_SAMPLE_MS / 1000,
      regionDeath: REGION_DEATH,
      killedShare: REGION_DEATH ? Number(args['killed-share']) : null,
      clientEveryMs: REGION_DEATH ? Number(args['client-every-ms']) : null,
    },
    results: all,
  });
  process.stdout.write(`\nwritten: ${path.relative(process.cwd(), file)}\n`);
}

main().then(
  () => process.exit(0),
  (err: unknown) => {
    process.stderr.write(`bench:scale failed: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
    process.exit(1);
  },
);
