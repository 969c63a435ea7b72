/**
 * The `haru worker` composition root: reads the environment, opens the state store and the Temporal
 * connection, registers search attributes, runs the worker, keeps a monitor per fleet (`keepMonitors`), serves
 * Prometheus metrics and the cluster's probes (workers/http-server.ts), and installs the signal handlers. Everything else in workers/ is a factory.
 */
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import { Client } from '@temporalio/client';
import { Runtime } from '@temporalio/worker';
import { createDatabase } from '../db/client';
import { migrate } from '../db/migrate';
import { createStore } from '../db/store';
import { createSpawnExec } from '../drivers/exec';
import { createSkyCli, skyProcessEnv } from '../drivers/sky';
import { connectWorkerTemporal } from '../temporal/connect';
import { loadWorkerConfig, type WorkerConfig } from './config';
import { createWorkerLogger } from './logger';
import { createWorkerMetrics } from './metrics';
import { createWorkerHttpServer, READY_CHECK_MS } from './http-server';
import { ensureSearchAttributes } from './search-attributes';
import { monitorTaskQueue } from '../core/task-queues';
import { ensureMonitors, keepMonitors } from './start';
import { createHaruWorker } from './worker';

/** A running worker process; `close` drains in-flight tasks and releases every connection. */
export interface RunningWorker {
  taskQueue: string;
  metricsUrl: string;
  /** Settles when the worker stops (rejects on a fatal worker error). */
  done: Promise<void>;
  close(): Promise<void>;
}

/** The SDK runtime's Prometheus exporter (task slots, poll latencies, sticky cache, …), unless its port is 0. */
export const sdkTelemetry = (
  config: Pick<WorkerConfig, 'HARU_WORKER_METRICS_HOST' | 'HARU_WORKER_SDK_METRICS_PORT'>,
) =>
  config.HARU_WORKER_SDK_METRICS_PORT === 0
    ? undefined
    : {
        metrics: {
          prometheus: { bindAddress: `${config.HARU_WORKER_METRICS_HOST}:${config.HARU_WORKER_SDK_METRICS_PORT}` },
        },
      };

/** Starts the worker from `env` and resolves once it polls and every fleet has a monitor. */
export async function startWorker(env: NodeJS.ProcessEnv = process.env): Promise<RunningWorker> {
  const config = loadWorkerConfig(env);
  const logger = createWorkerLogger(config.LOG_LEVEL, (line) => process.stdout.write(line));
  // Signals are handled below, in order: the Runtime's own handlers would stop the worker behind our back.
  Runtime.install({ logger, shutdownSignals: [], telemetryOptions: sdkTelemetry(config) });
  const database = await createDatabase({
    databaseUrl: config.DATABASE_URL,
    dataDir: path.resolve(config.HARU_STATE_DIR, 'pgdata'),
    tlsEnv: config,
  });
  const cleanups: (() => Promise<void>)[] = [() => database.close()];
  const cleanup = async () => {
    for (const fn of cleanups.reverse()) await fn().catch(() => undefined);
  };
  try {
    await migrate(database);
    const store = createStore(database);
    const connection = await connectWorkerTemporal(config.temporal);
    cleanups.push(() => connection.close());
    const namespace = config.temporal.namespace;
    try {
      const added = await ensureSearchAttributes(connection, namespace);
      if (added.length) logger.info('search attributes registered', { namespace, added });
    } catch (err) {
      logger.warn('search attributes not checked (operator API unavailable); register them by hand', {
        namespace,
        error: (err as Error).message,
      });
    }
    const metrics = createWorkerMetrics({ withDefaults: true });
    const worker = await createHaruWorker({
      connection,
      namespace,
      taskQueue: config.HARU_TASK_QUEUE,
      store,
      supervisorToken: config.HARU_SUPERVISOR_TOKEN,
      supervisorTls: config.supervisorTls,
      supervisorCertificates: config.supervisorCertificates,
      env,
      warn: (message, fields) => logger.warn(message, fields),
      sky: createSkyCli({ exec: createSpawnExec(), bin: config.HARU_SKY_BIN, env: skyProcessEnv(env) }),
      workflowBundle: config.HARU_WORKFLOW_BUNDLE ? { codePath: path.resolve(config.HARU_WORKFLOW_BUNDLE) } : undefined,
      metrics,
      maxConcurrentActivities: config.HARU_WORKER_MAX_ACTIVITIES,
      maxMonitors: config.HARU_WORKER_MAX_MONITORS,
      queues: config.HARU_WORKER_QUEUES,
      watchShards: config.HARU_MONITOR_SHARDS,
    });
    const done = worker.run();
    cleanups.push(async () => {
      if (worker.getState() === 'RUNNING') worker.shutdown();
      await done.catch(() => undefined);
    });
    const server = createWorkerHttpServer({
      metrics,
      workerState: () => worker.getState(),
      pingDatabase: () => database.ping(),
      pingTemporal: () =>
        connection
          .withDeadline(Date.now() + READY_CHECK_MS, () => connection.healthService.check({}))
          .then(() => undefined),
      warn: (message, fields) => logger.warn(message, fields),
    });
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(config.HARU_WORKER_METRICS_PORT, config.HARU_WORKER_METRICS_HOST, () => resolve());
    });
    cleanups.push(() => new Promise<void>((resolve) => server.close(() => resolve())));
    const { port } = server.address() as AddressInfo;
    const metricsUrl = `http://${config.HARU_WORKER_METRICS_HOST}:${port}/metrics`;
    const client = new Client({ connection, namespace });
    const fleets = await ensureMonitors(client, store, config.HARU_TASK_QUEUE, config.HARU_MONITOR_SHARDS);
    const keeper = keepMonitors({
      client,
      store,
      taskQueue: config.HARU_TASK_QUEUE,
      intervalMs: config.HARU_MONITOR_KEEP_INTERVAL_MS,
      logger,
      shards: config.HARU_MONITOR_SHARDS,
      onFleets: (all) => metrics.knowFleets(all),
    });
    cleanups.push(() => keeper.stop());
    logger.info('worker running', {
      taskQueue: config.HARU_TASK_QUEUE,
      monitorTaskQueue: monitorTaskQueue(config.HARU_TASK_QUEUE),
      polls: worker.taskQueues,
      namespace,
      temporal: config.temporal.address,
      database: database.kind,
      monitors: fleets.length,
      watchShards: config.HARU_MONITOR_SHARDS,
      metricsUrl,
    });
    let closing: Promise<void> | undefined;
    return {
      taskQueue: config.HARU_TASK_QUEUE,
      metricsUrl,
      done,
      close() {
        closing ??= cleanup().then(() => logger.info('worker stopped'));
        return closing;
      },
    };
  } catch (err) {
    await cleanup();
    throw err;
  }
}

/** `haru worker`: runs until SIGINT/SIGTERM, then shuts down gracefully (a second signal exits at once). */
export async function main(): Promise<void> {
  const running = await startWorker(process.env);
  let stopping = false;
  const stop = (signal: NodeJS.Signals) => {
    if (stopping) process.exit(130);
    stopping = true;
    process.stderr.write(`haru worker: ${signal}, shutting down\n`);
    running.close().then(
      () => process.exit(0),
      () => process.exit(1),
    );
  };
  process.on('SIGINT', stop);
  process.on('SIGTERM', stop);
  running.done.catch((err: unknown) => {
    process.stderr.write(`haru worker: ${err instanceof Error ? err.message : String(err)}\n`);
    void running.close().finally(() => process.exit(1));
  });
}
