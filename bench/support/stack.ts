import { writeFileSync } from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { Client, Connection } from '@temporalio/client';
import { bundleWorkflowCode, DefaultLogger, NativeConnection, Runtime, type Worker } from '@temporalio/worker';
import { type ApiApp, createApp } from '../../api/app';
import { type ApiConfig, defaultApiConfig } from '../../api/config';
import { silentLogger } from '../../api/logger';
import { createTemporalOrchestrator } from '../../api/orchestrator';
import { type DevServer, startTemporalDevServer } from '../../cli/temporal-dev-server';
import type { Store } from '../../db/store';
import { createHaruWorker } from '../../workers/worker';
import { freePort } from '../../test/support/ports';

const quiet = { trace() {}, debug() {}, info() {}, log() {}, warn() {}, error: (m: string) => console.error(m) };

/** A Temporal dev server of the benchmark's own (in memory), or the one at `address` when given. */
export async function startBenchTemporal(
  address?: string,
): Promise<{ address: string; pid: number | null; stop(): Promise<void> }> {
  Runtime.install({
    logger: new DefaultLogger('ERROR'),
    shutdownSignals: [],
    telemetryOptions: { logging: { filter: { core: 'ERROR', other: 'ERROR' } } },
  });
  if (address) return { address, pid: null, stop: async () => undefined };
  const server: DevServer = await startTemporalDevServer({
    port: await freePort(),
    headless: true,
    startTimeoutMs: 120_000,
  });
  return { address: server.address, pid: server.process.pid ?? null, stop: () => server.stop() };
}

/** The workflow bundle, built once per benchmark process (a few seconds). */
let bundle: Promise<{ code: string }> | undefined;
export const workflowBundle = () =>
  (bundle ??= bundleWorkflowCode({ workflowsPath: require.resolve('../../workflows'), logger: quiet }).then((b) => ({
    code: b.code,
  })));

/** Writes the workflow bundle to `file` (for `HARU_WORKFLOW_BUNDLE` of a `haru worker` process); returns `file`. */
export async function writeWorkflowBundle(file: string): Promise<string> {
  writeFileSync(file, (await workflowBundle()).code);
  return file;
}

/** A Haru worker running in this process, with production defaults unless `options` says otherwise. */
export async function startBenchWorker(opts: {
  address: string;
  taskQueue: string;
  store: Store;
  options?: Partial<Parameters<typeof createHaruWorker>[0]>;
}): Promise<{ worker: Worker; client: Client; stop(): Promise<void> }> {
  const connection = await NativeConnection.connect({ address: opts.address });
  const worker = await createHaruWorker({
    connection,
    namespace: 'default',
    taskQueue: opts.taskQueue,
    store: opts.store,
    workflowBundle: await workflowBundle(),
    ...opts.options,
  });
  const running = worker.run();
  return {
    worker,
    client: new Client({ connection }),
    async stop() {
      if (worker.getState() === 'RUNNING') worker.shutdown();
      await running.catch(() => undefined);
      await connection.close();
    },
  };
}

/** Haru's API on 127.0.0.1:<port> over `store`, composed as `haru api` composes it (minus provisioning). */
export async function startBenchApi(opts: {
  address: string;
  taskQueue: string;
  store: Store;
  database: Parameters<typeof createApp>[0]['database'];
  port?: number;
  config?: Partial<ApiConfig>;
}): Promise<{ url: string; api: ApiApp; stop(): Promise<void> }> {
  const config = defaultApiConfig({ HARU_TASK_QUEUE: opts.taskQueue, ...opts.config });
  const connection = Connection.lazy({ address: opts.address });
  const client = new Client({ connection });
  const orchestrator = createTemporalOrchestrator({
    client,
    connection,
    taskQueue: config.HARU_TASK_QUEUE,
    timeoutMs: config.HARU_TEMPORAL_TIMEOUT_MS,
  });
  const api = createApp({ store: opts.store, database: opts.database, orchestrator, config, logger: silentLogger });
  await api.start();
  const server = http.createServer(api.app);
  server.keepAliveTimeout = 65_000;
  await new Promise<void>((resolve) => server.listen(opts.port ?? 0, '127.0.0.1', resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    api,
    async stop() {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
      await api.close();
      await orchestrator.drain();
      await connection.close();
    },
  };
}

/** Polls `check` every `intervalMs` until it is truthy; throws naming `what` after `timeoutMs`. */
export async function until<T>(
  what: string,
  check: () => Promise<T | null | undefined | false> | T | null | undefined | false,
  timeoutMs = 60_000,
  intervalMs = 20,
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  let last: unknown;
  for (;;) {
    try {
      const value = await check();
      if (value) return value;
    } catch (err) {
      last = err;
    }
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}${last ? `: ${String(last)}` : ''}`);
    await new Promise((r) => setTimeout(r, intervalMs));
  }
}
