import { Client } from '@temporalio/client';
import type { HaruDatabase } from '../db/client';
import { lazyClientTemporal } from '../temporal/connect';
import { createStore } from '../db/store';
import { type ApiApp, createApp } from './app';
import type { ApiConfig } from './config';
import type { Logger } from '../lib/logger';
import type { ApiMetrics } from './metrics';
import { createTemporalOrchestrator } from './orchestrator';
import { createTemporalProvisioningStarter } from './routes/provisioning';

export interface ComposedApi {
  api: ApiApp;
  /** Closes the app, drains in-flight Temporal calls and closes the Temporal connection (not the database). */
  close(): Promise<void>;
}

/**
 * Wires the API app to a database and a lazily connected Temporal client, the way `haru api` runs it:
 * the API (and chat) must come up and keep serving while Temporal is down. Starts the app's background
 * parts (route LISTEN); the caller owns the HTTP server and the database.
 */
export async function composeApi(opts: {
  database: HaruDatabase;
  config: ApiConfig;
  logger: Logger;
  metrics?: ApiMetrics;
  connectTimeoutMs?: number;
  queryTimeoutMs?: number;
}): Promise<ComposedApi> {
  const { config, database } = opts;
  const connection = await lazyClientTemporal(config.temporal, {
    connectTimeoutMs: opts.connectTimeoutMs,
    onUnreachable: (reason) =>
      opts.logger.warn('temporal unreachable at start; the API serves without it', {
        temporal: config.temporal.address,
        reason,
      }),
  });
  const client = new Client({ connection, namespace: config.temporal.namespace });
  const temporal = {
    client,
    connection,
    taskQueue: config.HARU_TASK_QUEUE,
    timeoutMs: config.HARU_TEMPORAL_TIMEOUT_MS,
  };
  const orchestrator = createTemporalOrchestrator({ ...temporal, queryTimeoutMs: opts.queryTimeoutMs });
  const api = createApp({
    store: createStore(database),
    database,
    orchestrator,
    config,
    logger: opts.logger,
    metrics: opts.metrics,
    provisioning: createTemporalProvisioningStarter(temporal),
  });
  await api.start();
  return {
    api,
    async close() {
      await api.close();
      await orchestrator.drain();
      await connection.close();
    },
  };
}
