/**
 * The worker inside `haru dev` (part of its composition root, cli/dev/main.ts): one Temporal worker on the
 * dev stack's store, its metrics endpoint on 127.0.0.1, the fleet's monitor with auto-failover resumed, and
 * the keeper loop that keeps a monitor per fleet (workers/start.ts).
 */
import http from 'node:http';
import path from 'node:path';
import { Client } from '@temporalio/client';
import { Runtime } from '@temporalio/worker';
import type { Store } from '../../db/store';
import { connectWorkerTemporal } from '../../temporal/connect';
import type { WorkerConfig } from '../../workers/config';
import { createWorkerLogger } from '../../workers/logger';
import { createWorkerMetrics } from '../../workers/metrics';
import { ensureSearchAttributes } from '../../workers/search-attributes';
import { sdkTelemetry } from '../../workers/main';
import { ensureMonitor, keepMonitors } from '../../workers/start';
import { createHaruWorker } from '../../workers/worker';
import { monitorWorkflowId, resumeAutoFailoverSignal } from '../../workflows/definitions';
import type { Closer } from './closers';
import { closeServer, listenLocal } from './servers';

export interface DevWorkerOptions {
  config: WorkerConfig;
  store: Store;
  fleetId: string;
  fleetSlug: string;
  cwd: string;
  writeLog: (line: string) => void;
  warn: (line: string) => void;
  /** Receives what to stop, in start order. */
  closers: Closer[];
  /** Where a domain's `supervisor.tokenEnv` is read (the dev stack's environment). */
  env: NodeJS.ProcessEnv;
}

export interface DevWorker {
  /** Settles when the worker stops (rejects on a fatal worker error). */
  done: Promise<void>;
  /** The worker's own Prometheus endpoint (`haru_*`). */
  metricsUrl: string;
  /** The Temporal SDK runtime's (`temporal_*`); null when HARU_WORKER_SDK_METRICS_PORT is 0. */
  sdkMetricsUrl: string | null;
}

/**
 * Starts the worker and the fleet's monitor. Installs the Temporal Runtime once per process, without its own
 * signal handlers (`haru dev` stops the worker itself, in order), with the SDK's metrics endpoint as
 * `haru worker` has it.
 */
export async function startDevWorker(opts: DevWorkerOptions): Promise<DevWorker> {
  const { config, closers } = opts;
  const logger = createWorkerLogger(config.LOG_LEVEL, opts.writeLog);
  const telemetryOptions = sdkTelemetry(config);
  Runtime.install({ logger, shutdownSignals: [], telemetryOptions });
  const connection = await connectWorkerTemporal(config.temporal);
  closers.push({ what: 'the worker connection', fn: () => connection.close() });
  await ensureSearchAttributes(connection, config.temporal.namespace).catch((err: Error) =>
    opts.warn(`haru dev: search attributes not checked: ${err.message}`),
  );
  const metrics = createWorkerMetrics({ withDefaults: false });
  const worker = await createHaruWorker({
    connection,
    namespace: config.temporal.namespace,
    taskQueue: config.HARU_TASK_QUEUE,
    store: opts.store,
    supervisorToken: config.HARU_SUPERVISOR_TOKEN,
    supervisorTls: config.supervisorTls,
    env: opts.env,
    workflowBundle: config.HARU_WORKFLOW_BUNDLE
      ? { codePath: path.resolve(opts.cwd, config.HARU_WORKFLOW_BUNDLE) }
      : undefined,
    metrics,
    watchShards: config.HARU_MONITOR_SHARDS,
  });
  const done = worker.run();
  closers.push({
    what: 'the worker',
    fn: async () => {
      if (worker.getState() === 'RUNNING') worker.shutdown();
      await done.catch(() => undefined);
    },
  });
  const metricsServer = http.createServer((req, res) => {
    if (req.method !== 'GET' || req.url !== '/metrics') return void res.writeHead(404).end();
    metrics.registry.metrics().then(
      (text) => res.writeHead(200, { 'content-type': metrics.registry.contentType }).end(text),
      () => res.writeHead(500).end(),
    );
  });
  const metricsPort = await listenLocal(metricsServer, config.HARU_WORKER_METRICS_PORT);
  closers.push({ what: 'the worker metrics endpoint', fn: () => closeServer(metricsServer) });

  const client = new Client({ connection, namespace: config.temporal.namespace });
  await ensureMonitor(client, opts.fleetId, config.HARU_TASK_QUEUE, opts.fleetSlug, config.HARU_MONITOR_SHARDS);
  // The worker's keeper loop, as `haru worker` runs it: a monitor that ends is started again, and an
  // operation whose workflow closed (the stack stopped mid-promotion) is ended.
  const keeper = keepMonitors({
    client,
    store: opts.store,
    taskQueue: config.HARU_TASK_QUEUE,
    intervalMs: config.HARU_MONITOR_KEEP_INTERVAL_MS,
    logger,
    shards: config.HARU_MONITOR_SHARDS,
    onFleets: (all) => metrics.knowFleets(all),
  });
  closers.push({ what: 'the monitor keeper', fn: () => keeper.stop() });
  // A pause signalled in an earlier run survives in the monitor's state: the dev stack starts with it on.
  await client.workflow.getHandle(monitorWorkflowId(opts.fleetId)).signal(resumeAutoFailoverSignal);
  return {
    done,
    metricsUrl: `http://127.0.0.1:${metricsPort}/metrics`,
    sdkMetricsUrl: telemetryOptions ? `http://${telemetryOptions.metrics.prometheus.bindAddress}/metrics` : null,
  };
}
