/**
 * `bench:scale --region-death`: a region dies under load. Haru's API runs as its own process, one client per
 * fleet sends a small chat completion through its proxy at a steady pace, and, once every monitor would fail
 * its fleet over, the simulated hosts of the dying fleets' actives are killed at once (SIGKILLed processes with
 * `--sim-process`, else every listener and connection dropped). The monitors, auto-failover on, must find them
 * and fail each fleet over; the figures are per fleet (region-death-figures.ts) and, while it happens, what the
 * control plane spent: CPU of the workers, Temporal and the API, and the workers' event-loop lag.
 */
import type { Client } from '@temporalio/client';
import type { TestDatabase } from '../../db/testing';
import { parsePrometheusText, sumSamples } from '../../supervisor/prometheus-text';
import { eventually } from '../../test/support/eventually';
import { freePort } from '../../test/support/ports';
import { healthQuery, monitorWorkflowId } from '../../workflows/definitions';
import { cpuMs } from './cpu';
import { printTimeline } from './history';
import { type HaruProcess, startHaruProcess } from './processes';
import { regionDeathFigures, type RegionDeathFigures, type RegionFleet } from './region-death-figures';
import type { SimHost } from './sim-host';
import { percentile } from './stats';
import { startSteadyClients } from './steady-clients';

export interface RegionDeathRun {
  figures: RegionDeathFigures;
  /** Percentiles over the killed fleets (ms after the kill). */
  detectionMs: Percentiles;
  commitMs: Percentiles;
  firstAnswerMs: Percentiles;
  clientErrors: number;
  inFlightErrors: number;
  /** Killed fleets with other than exactly one promotion. */
  notFailedOverOnce: number;
  /** From the kill to the last promotion's end. */
  windowMs: number;
  /** CPU during the window, in % of one core. */
  cpuPercent: { workers: number; temporalServer: number | null; api: number; simHostsAndBench: number };
  /** The workers' event-loop lag during the window (prom-client's, read every second): the worst and p99 of maxima. */
  workerLagMs: { max: number | null; p99OfMaxima: number | null };
  requests: number;
}

interface Percentiles {
  p50: number | null;
  p99: number | null;
  max: number | null;
}

const percentiles = (values: readonly (number | null)[]): Percentiles => {
  const xs = values.filter((v): v is number => v !== null);
  return { p50: percentile(xs, 50), p99: percentile(xs, 99), max: percentile(xs, 100) };
};

/** Every worker's `nodejs_eventloop_lag_max_seconds` (the maximum since its last scrape), in ms. */
async function lagMaxima(workers: readonly HaruProcess[]): Promise<number[]> {
  return Promise.all(
    workers.map(async (w) => {
      const text = await (await fetch(String(w.ready.metricsUrl))).text();
      return (sumSamples(parsePrometheusText(text), 'nodejs_eventloop_lag_max_seconds') ?? 0) * 1000;
    }),
  );
}

/** `fleet: reason` of every operation so far (before the kill there should be none). */
async function failoversSoFar(db: TestDatabase, fleets: readonly RegionFleet[]): Promise<string[]> {
  const operations = await Promise.all(fleets.map((f) => db.store.operations.list(f.fleetId)));
  return operations.flatMap((ops, i) => ops.map((o) => `${fleets[i]!.slug}: ${o.requestedBy}: ${o.reason}`));
}

/** The Temporal history of the killed fleet's promotion that committed last, in ms after the kill. */
async function printSlowestPromotion(
  client: Client,
  db: TestDatabase,
  figures: RegionDeathFigures,
  fleets: readonly RegionFleet[],
  killAt: number,
): Promise<void> {
  const slowest = figures.killed.reduce((a, b) => ((b.commitMs ?? Infinity) > (a.commitMs ?? Infinity) ? b : a));
  const fleet = fleets.find((f) => f.slug === slowest.slug)!;
  const promotion = (await db.store.operations.list(fleet.fleetId)).find((o) => o.kind === 'promote');
  if (!promotion) return;
  const history = await client.workflow.getHandle(promotion.workflowId).fetchHistory();
  printTimeline(history, killAt, `${fleet.slug}: its promotion, slowest to commit (ms after the kill)`);
}

export async function runRegionDeath(opts: {
  db: TestDatabase;
  client: Client;
  temporal: { address: string; pid: number | null };
  taskQueue: string;
  workers: readonly HaruProcess[];
  fleets: readonly RegionFleet[];
  /** The hosts of the killed fleets' actives (nothing else), and every other host. */
  dying: readonly SimHost[];
  /** The simulated hosts' and this process's CPU so far (ms). */
  simAndBenchCpuMs: () => number;
  model: string;
  clientEveryMs: number;
  /** Print the Temporal history of the promotion slowest to commit (ms after the kill). */
  timeline?: boolean;
}): Promise<RegionDeathRun> {
  const { db, fleets, workers } = opts;
  const api = await startHaruProcess(
    'api',
    {
      DATABASE_URL: db.url,
      TEMPORAL_ADDRESS: opts.temporal.address,
      HARU_TASK_QUEUE: opts.taskQueue,
      PORT: String(await freePort()),
      LOG_LEVEL: 'info',
    },
    'api listening',
  );
  const apiUrl = String(api.ready.url);
  try {
    const early = await eventually(
      'every monitor to see its west as a viable standby',
      async () => {
        const failedOver = await failoversSoFar(db, fleets);
        if (failedOver.length > 0) return failedOver;
        for (const f of fleets) {
          const health = await opts.client.workflow.getHandle(monitorWorkflowId(f.fleetId)).query(healthQuery);
          if (!health?.domains.find((d) => d.domainId === f.westId)?.isViableStandby) return null;
        }
        return [];
      },
      300_000,
      500,
    );
    if (early.length > 0)
      throw new Error(`healthy fleets failed over before any host was killed:\n${early.join('\n')}`);
    const clients = startSteadyClients({
      apiUrl,
      fleets: fleets.map((f) => f.slug),
      model: opts.model,
      everyMs: opts.clientEveryMs,
    });
    const { outcomes } = clients;
    await eventually(
      'every fleet’s client answered by east',
      () => fleets.every((f) => outcomes.some((o) => o.fleet === f.slug && o.error === null && o.domain === 'east')),
      120_000,
      200,
    );

    const workersCpu = () => workers.reduce((sum, w) => sum + cpuMs(w.pid), 0);
    const cpuFrom = {
      workers: workersCpu(),
      temporal: opts.temporal.pid ? cpuMs(opts.temporal.pid) : 0,
      api: cpuMs(api.pid),
      sim: opts.simAndBenchCpuMs(),
    };
    await lagMaxima(workers); // resets the maxima: the samples below cover the window only
    const lagSamples: number[] = [];
    let isSampling = true;
    const sampler = (async () => {
      while (isSampling) {
        await new Promise((r) => setTimeout(r, 1_000));
        lagSamples.push(...(await lagMaxima(workers).catch(() => [])));
      }
    })();

    const killAt = Date.now();
    await Promise.all(opts.dying.map((h) => h.kill()));
    const killed = fleets.filter((f) => f.isKilled);
    await eventually(
      'every fleet of the dead region to be answered from west and its promotion to end',
      async () => {
        for (const f of killed) {
          if (!outcomes.some((o) => o.fleet === f.slug && o.error === null && o.domain === 'west')) return false;
          const operations = await db.store.operations.list(f.fleetId);
          if (operations.length === 0 || operations.some((o) => o.state === 'pending' || o.state === 'running'))
            return false;
        }
        return true;
      },
      600_000,
      250,
    );
    const windowMs = Date.now() - killAt;
    isSampling = false;
    await sampler;
    const share = (ms: number) => (ms / windowMs) * 100;
    const cpuPercent = {
      workers: share(workersCpu() - cpuFrom.workers),
      temporalServer: opts.temporal.pid ? share(cpuMs(opts.temporal.pid) - cpuFrom.temporal) : null,
      api: share(cpuMs(api.pid) - cpuFrom.api),
      simHostsAndBench: share(opts.simAndBenchCpuMs() - cpuFrom.sim),
    };
    await clients.stop();

    const figures = await regionDeathFigures(db.store, fleets, outcomes, killAt);
    if (opts.timeline) await printSlowestPromotion(opts.client, db, figures, fleets, killAt);
    return {
      figures,
      detectionMs: percentiles(figures.killed.map((k) => k.detectionMs)),
      commitMs: percentiles(figures.killed.map((k) => k.commitMs)),
      firstAnswerMs: percentiles(figures.killed.map((k) => k.firstAnswerMs)),
      clientErrors: figures.killed.reduce((n, k) => n + k.clientErrors, 0) + figures.survivors.clientErrors,
      inFlightErrors: figures.killed.reduce((n, k) => n + k.inFlightErrors, 0),
      notFailedOverOnce: figures.killed.filter((k) => k.promotions !== 1).length,
      windowMs,
      cpuPercent,
      workerLagMs: {
        max: lagSamples.length ? Math.max(...lagSamples) : null,
        p99OfMaxima: percentile(lagSamples, 99),
      },
      requests: outcomes.length,
    };
  } finally {
    await api.stop();
  }
}
