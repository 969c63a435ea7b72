import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { type ApiApp, createApp } from '../../../api/app';
import { type ApiConfig, defaultApiConfig } from '../../../api/config';
import { type Logger, silentLogger } from '../../../lib/logger';
import type { WorkerMetrics } from '../../../workers/metrics';
import { ensureMonitor } from '../../../workers/start';
import { healthQuery, monitorWorkflowId } from '../../../workflows/definitions';
import { type SimFleet, type SimFleetOptions, startSimFleet } from '../../workflows/support/sim-fleet';
import { eventually, type TestClients, type TestServer, uniqueTaskQueue } from '../../workflows/support/temporal';
import { startTestWorker } from '../../workflows/support/worker';

/** A simulated fleet run as an operator runs it: real supervisors, the worker and its monitor, the API over HTTP. */
export interface LiveFleet {
  fleet: SimFleet;
  api: ApiApp;
  /** The API's base URL (`http://127.0.0.1:<port>`). */
  url: string;
  slug: string;
  /** Moves the API's clock (not the worker's) `ms` ahead of the wall clock. */
  advanceApiClock(ms: number): void;
  close(): Promise<void>;
}

/** Starts it and waits until the monitor has looked at the fleet once. */
export async function startLiveFleet(
  server: TestClients & Pick<TestServer, 'connection'>,
  opts: SimFleetOptions & { config?: Partial<ApiConfig>; logger?: Logger; workerMetrics?: WorkerMetrics } = {},
): Promise<LiveFleet> {
  const fleet = await startSimFleet(opts);
  const taskQueue = uniqueTaskQueue('live');
  const worker = await startTestWorker(
    server.connection,
    fleet.db.store,
    taskQueue,
    opts.workerMetrics ? { metrics: opts.workerMetrics } : {},
  );
  const slug = fleet.layout.fleet.slug;
  await ensureMonitor(server.client, fleet.fleetId, taskQueue, slug);
  const monitor = server.client.workflow.getHandle(monitorWorkflowId(fleet.fleetId));
  await eventually('the monitor to look at the fleet', async () => (await monitor.query(healthQuery)) !== null, 60_000);
  const config = defaultApiConfig({ HARU_TASK_QUEUE: taskQueue, HARU_STORE_TIMEOUT_MS: 5_000, ...opts.config });
  let clockOffsetMs = 0;
  const api = createApp({
    now: () => new Date(Date.now() + clockOffsetMs),
    store: fleet.db.store,
    database: fleet.db.database,
    orchestrator: server.orchestrator(taskQueue),
    config,
    logger: opts.logger ?? silentLogger,
  });
  await api.start();
  const httpServer = http.createServer(api.handle);
  await new Promise<void>((resolve) => httpServer.listen(0, '127.0.0.1', resolve));
  return {
    fleet,
    api,
    url: `http://127.0.0.1:${(httpServer.address() as AddressInfo).port}`,
    slug,
    advanceApiClock(ms) {
      clockOffsetMs += ms;
    },
    async close() {
      httpServer.closeAllConnections();
      await new Promise<void>((resolve) => httpServer.close(() => resolve()));
      await api.close();
      await monitor.terminate('test over').catch(() => undefined);
      await worker.stop();
      await fleet.close();
    },
  };
}
