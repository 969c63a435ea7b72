import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { Client } from '@temporalio/client';
import { createTestDatabase, seedLayout } from '../../db/testing';
import { fleetLayoutSchema } from '../../schemas/layout';
import { SIM_TRAINER, type SimDomain, startSimDomain } from '../../sim/domain';
import { eventually } from '../../test/support/eventually';
import { freePort } from '../../test/support/ports';
import { healthQuery, monitorWorkflowId } from '../../workflows/definitions';
import { startHaruProcess } from './processes';

/** What a failover run shares with the benchmark around it: the Temporal stack of `startBenchStack`. */
export interface FailoverBenchContext {
  address: string;
  client: Client;
  /** The prebuilt workflow bundle (HARU_WORKFLOW_BUNDLE). */
  bundle: string;
}

/** A fleet ready to fail over: east active, west a viable standby, worker and API running. */
export interface FailoverFleet {
  slug: string;
  fleetId: string;
  westId: string;
  stateDir: string;
  db: Awaited<ReturnType<typeof createTestDatabase>>;
  east: SimDomain;
  west: SimDomain;
  apiUrl: string;
  ctx: FailoverBenchContext;
  /** When the routing pointer first moved (the `haru_route` notification), 0 until then. */
  movedAt(): number;
  /** Undo everything, newest first; also what `stop` runs. */
  cleanups: (() => Promise<unknown>)[];
  stop(): Promise<void>;
}

async function layoutFor(stateDir: string, slug: string, models: number) {
  const domain = async (name: string) => ({
    slug: name,
    supervisorUrl: `http://127.0.0.1:${await freePort()}`,
    slots: [
      {
        kind: 'inference' as const,
        gpuIndex: 0,
        models: await Promise.all(
          Array.from({ length: models }, async (_, i) => ({
            name: `bench-${i}`,
            servingUrl: `http://127.0.0.1:${await freePort()}/v1`,
          })),
        ),
      },
      {
        kind: 'training' as const,
        gpuIndex: 0,
        command: ['node', SIM_TRAINER],
        checkpointDir: path.join(stateDir, name, 'checkpoints'),
      },
    ],
  });
  return fleetLayoutSchema.parse({
    fleet: { slug, activeDomain: 'east', policy: {} }, // production defaults
    domains: [await domain('east'), await domain('west')],
  });
}

/**
 * Two simulated domains as real processes (east active, west standby with a training run), a fresh database,
 * `haru worker` and `haru api` as their own processes with production defaults; resolves once the monitor
 * sees west as a viable standby. Only the worker and the API wait for `ctxReady`, so the rest starts while
 * Temporal does. `onPhase` is told how long each part of the start took (ms).
 */
export async function startFailoverFleet(
  run: number,
  ctxReady: FailoverBenchContext | Promise<FailoverBenchContext>,
  opts: { wakeDelayMs: number; models: number; onPhase?: (phase: string, ms: number) => void },
): Promise<FailoverFleet> {
  const stateDir = mkdtempSync(path.join(os.tmpdir(), 'haru-bench-failover-'));
  const slug = `bench-${process.pid}-${run}`;
  const layout = await layoutFor(stateDir, slug, opts.models);
  const taskQueue = `bench-failover-${process.pid}-${run}`;
  let phaseAt = Date.now();
  const phase = (name: string) => {
    opts.onPhase?.(name, Date.now() - phaseAt);
    phaseAt = Date.now();
  };
  const cleanups: (() => Promise<unknown>)[] = [async () => rmSync(stateDir, { recursive: true, force: true })];
  const stop = async () => {
    for (const fn of cleanups.reverse()) await fn().catch(() => undefined);
  };
  try {
    const db = await createTestDatabase();
    cleanups.push(() => db.drop());
    phase('database');
    const sim = (slugOf: 'east' | 'west') =>
      startSimDomain({
        layout,
        domainSlug: slugOf,
        stateDir: path.join(stateDir, slugOf),
        wakeDelayMs: opts.wakeDelayMs,
        role: slugOf === 'west' ? 'standby' : 'active',
      });
    const [east, west] = await Promise.all([sim('east'), sim('west')]);
    cleanups.push(
      () => west.kill(),
      () => east.kill(),
    );
    phase('simulated hosts');
    const { fleetId } = await seedLayout(db.store, layout);
    const westId = (await db.store.fleets.snapshot(fleetId))!.domains.find((d) => d.slug === 'west')!.id;
    const ctx = await ctxReady; // the hosts and the database start while Temporal does
    phase('Temporal');
    // Worker and API run as their own processes, as in production; this process only drives load and measures.
    const common = {
      DATABASE_URL: db.url,
      TEMPORAL_ADDRESS: ctx.address,
      HARU_TASK_QUEUE: taskQueue,
      LOG_LEVEL: 'info',
    };
    const apiPort = await freePort();
    const started = await Promise.allSettled([
      startHaruProcess(
        'worker',
        {
          ...common,
          HARU_WORKFLOW_BUNDLE: ctx.bundle,
          HARU_WORKER_METRICS_PORT: '0',
          HARU_WORKER_SDK_METRICS_PORT: '0', // off: several workers share this machine
          HARU_WORKER_METRICS_HOST: '127.0.0.1',
        },
        'worker running',
      ),
      startHaruProcess('api', { ...common, PORT: String(apiPort) }, 'api listening'),
    ]);
    // Both start at once; one that started is stopped even when the other failed.
    for (const s of started) if (s.status === 'fulfilled') cleanups.push(() => s.value.stop());
    for (const s of started) if (s.status === 'rejected') throw s.reason;
    phase('worker and api');
    const monitor = ctx.client.workflow.getHandle(monitorWorkflowId(fleetId));
    cleanups.push(() => monitor.terminate('bench over').catch(() => undefined));
    let movedAt = 0;
    const unlisten = await db.database.listen('haru_route', () => {
      movedAt ||= Date.now();
    });
    cleanups.push(() => unlisten());
    await eventually(
      'the monitor to see west as a viable standby',
      async () => (await monitor.query(healthQuery))?.domains.find((d) => d.slug === 'west')?.isViableStandby,
      120_000,
      100,
    );
    phase('monitor sees the standby');
    return {
      slug,
      fleetId,
      westId,
      stateDir,
      db,
      east,
      west,
      apiUrl: `http://127.0.0.1:${apiPort}`,
      ctx,
      movedAt: () => movedAt,
      cleanups,
      stop,
    };
  } catch (err) {
    await stop();
    throw err;
  }
}
