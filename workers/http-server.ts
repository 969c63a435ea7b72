import http from 'node:http';
import { HaruError } from '../schemas/errors';
import type { WorkerMetrics } from './metrics';

/**
 * The worker's one HTTP listener: Prometheus and a cluster's probes (deploy/kubernetes/worker.yaml).
 *
 * - `GET /metrics`: the worker's metrics.
 * - `GET /healthz` (liveness): the Temporal worker runs and this event loop answers. Nothing else is asked: a
 *   restart does not heal a Postgres or Temporal outage, it only adds a cold start to it.
 * - `GET /readyz` (readiness): the worker runs, and Postgres and Temporal both answer within
 *   `READY_CHECK_MS`, the API's `/readyz` answers and codes (a rollout waits for a worker that can work).
 *
 * Open like the API's probes: an answer says what is down, never the driver's error text (that goes to `warn`).
 */
export interface WorkerHttpDeps {
  metrics: Pick<WorkerMetrics, 'registry'>;
  /** The SDK worker's state: `RUNNING` while it polls (`INITIALIZED`, `STOPPING`, `DRAINING`, … otherwise). */
  workerState(): string;
  pingDatabase(): Promise<void>;
  /** Temporal's gRPC health check, bounded by the caller's deadline of `READY_CHECK_MS`. */
  pingTemporal(): Promise<void>;
  warn(message: string, fields: Record<string, unknown>): void;
}

/** The routes the listener serves (GET). */
export const WORKER_ROUTES = ['/metrics', '/healthz', '/readyz'] as const;

/** How long `/readyz` waits for each dependency: under the probes' 5 s `timeoutSeconds`. */
export const READY_CHECK_MS = 2_000;

const errorText = (err: unknown) => (err instanceof Error ? err.message : String(err));

function within(p: Promise<void>, ms: number): Promise<void> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`no answer in ${ms} ms`)), ms);
  });
  return Promise.race([p, late]).finally(() => clearTimeout(timer));
}

/** What `/healthz` and `/readyz` answer: 200 with a body, or the error a probe fails on. */
export async function workerProbe(path: '/healthz' | '/readyz', deps: WorkerHttpDeps): Promise<object> {
  const state = deps.workerState();
  if (state !== 'RUNNING') throw new HaruError('worker_not_running', `the Temporal worker is ${state}`);
  if (path === '/healthz') return { status: 'ok' };
  const [postgres, temporal] = await Promise.allSettled([
    within(deps.pingDatabase(), READY_CHECK_MS),
    within(deps.pingTemporal(), READY_CHECK_MS),
  ]);
  if (postgres.status === 'rejected')
    deps.warn('readiness: Postgres is unreachable', { error: errorText(postgres.reason) });
  if (temporal.status === 'rejected')
    deps.warn('readiness: Temporal is unreachable', { error: errorText(temporal.reason) });
  if (postgres.status === 'rejected') {
    const also = temporal.status === 'rejected' ? '; Temporal is unreachable too' : '';
    throw new HaruError('state_store_unavailable', `Postgres is unreachable${also}`);
  }
  if (temporal.status === 'rejected') throw new HaruError('orchestrator_unavailable', 'Temporal is unreachable');
  return { status: 'ready', checks: { postgres: 'ok', temporal: 'ok' } };
}

/** The listener's request handler (not yet listening). */
export function createWorkerHttpServer(deps: WorkerHttpDeps): http.Server {
  const json = (res: http.ServerResponse, status: number, body: object) =>
    res.writeHead(status, { 'content-type': 'application/json' }).end(JSON.stringify(body));
  let readyCheck: Promise<object> | null = null;
  return http.createServer((req, res) => {
    const path = req.url?.split('?')[0];
    if (req.method !== 'GET') return json(res, 404, new HaruError('not_found', 'no such route').toBody());
    if (path === '/metrics') {
      deps.metrics.registry.metrics().then(
        (text) => res.writeHead(200, { 'content-type': deps.metrics.registry.contentType }).end(text),
        () => json(res, 500, new HaruError('internal_error', 'metrics could not be collected').toBody()),
      );
      return;
    }
    if (path !== '/healthz' && path !== '/readyz')
      return json(res, 404, new HaruError('not_found', 'no such route').toBody());
    // However many ask at once (a scrape, the kubelet, a flood on an open port), one check runs.
    const probe =
      path === '/healthz'
        ? workerProbe(path, deps)
        : (readyCheck ??= workerProbe(path, deps).finally(() => (readyCheck = null)));
    probe.then(
      (body) => json(res, 200, body),
      (err: unknown) => {
        const e = err instanceof HaruError ? err : new HaruError('internal_error', 'the check failed');
        json(res, e.status, e.toBody());
      },
    );
  });
}
