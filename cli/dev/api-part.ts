/**
 * The API inside `haru dev` (part of its composition root, cli/dev/main.ts): the real Express app on the
 * dev stack's database (PGlite serves one process only, so API and worker share it), on 127.0.0.1.
 */
import http from 'node:http';
import { Client } from '@temporalio/client';
import { createApp } from '../../api/app';
import type { ApiConfig } from '../../api/config';
import { createJsonLogger } from '../../lib/logger';
import { createApiMetrics } from '../../api/metrics';
import { createTemporalOrchestrator } from '../../api/orchestrator';
import type { HaruDatabase } from '../../db/client';
import type { Store } from '../../db/store';
import { lazyClientTemporal } from '../../temporal/connect';
import type { Closer } from './closers';
import { closeServer, listenLocal } from './servers';
import { waitFor } from './wait';

export interface DevApiOptions {
  config: ApiConfig;
  store: Store;
  database: HaruDatabase;
  writeLog: (line: string) => void;
  closers: Closer[];
}

/** Starts the API and resolves with its URL once `GET /readyz` answers 200 (Postgres and Temporal reachable). */
export async function startDevApi(opts: DevApiOptions): Promise<{ url: string }> {
  const { config, closers } = opts;
  // Lazy, as in `haru api`: the API serves chat while Temporal is unreachable.
  const connection = await lazyClientTemporal(config.temporal);
  closers.push({ what: 'the API connection', fn: () => connection.close() });
  const app = createApp({
    store: opts.store,
    database: opts.database,
    orchestrator: createTemporalOrchestrator({
      client: new Client({ connection, namespace: config.temporal.namespace }),
      connection,
      taskQueue: config.HARU_TASK_QUEUE,
      timeoutMs: config.HARU_TEMPORAL_TIMEOUT_MS,
    }),
    config,
    logger: createJsonLogger({ level: config.LOG_LEVEL, write: opts.writeLog, base: { service: 'haru-api' } }),
    metrics: createApiMetrics({ withDefaults: true }),
  });
  await app.start();
  closers.push({ what: 'the API', fn: () => app.close() });
  const server = http.createServer(app.handle);
  server.keepAliveTimeout = 65_000;
  const port = await listenLocal(server, config.PORT);
  closers.push({ what: 'the API server', fn: () => closeServer(server) });
  const url = `http://127.0.0.1:${port}`;
  await waitFor(`${url}/readyz`, async () => ((await fetch(`${url}/readyz`)).ok ? true : undefined), {
    timeoutMs: 60_000,
    intervalMs: 250,
  });
  return { url };
}
