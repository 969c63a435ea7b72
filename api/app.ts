import type { IncomingMessage, ServerResponse } from 'node:http';
import express, { type Express, type RequestHandler } from 'express';
import { bearerAuth } from './auth';
import type { ApiConfig } from './config';
import { errorMiddleware, notFoundHandler } from './errors';
import type { Logger } from './logger';
import { type ApiMetrics, createApiMetrics } from './metrics';
import { buildOpenApiDocument } from './openapi';
import type { Orchestrator } from './orchestrator';
import { createForwarder, type Forwarder } from './proxy/forwarder';
import { createHealthSignal } from './proxy/health-signal';
import { createHoldQueue } from './proxy/hold-queue';
import type { ProxyDeps } from './proxy/inference';
import { leanInference } from './proxy/lean';
import { createRoutingCache, ROUTE_CHANNEL, type RoutingCache } from './proxy/routing-cache';
import type { RouteContext } from './routes/context';
import { controlRoutes } from './routes/control';
import { pauseRoutes } from './routes/pause';
import { eventRoutes } from './routes/events';
import { fleetRoutes } from './routes/fleets';
import { healthRoutes } from './routes/health';
import { inferenceBodyReader, inferenceRoutes } from './routes/inference';
import { operationRoutes } from './routes/operations';
import { type ProvisioningStarter, provisioningRoutes } from './routes/provisioning';
import type { ApiDatabase, ApiStore } from './store';

type ExpressEntry = (req: IncomingMessage, res: ServerResponse, callback?: (err?: unknown) => void) => void;

/** Control bodies are small JSON documents (DESIGN.md §5). */
export const CONTROL_BODY_LIMIT_BYTES = 16 * 1024;

export interface ApiDeps {
  store: ApiStore;
  /** For readiness and the `haru_route` LISTEN push. */
  database: ApiDatabase;
  orchestrator: Orchestrator;
  config: ApiConfig;
  logger: Logger;
  now?: () => Date;
  metrics?: ApiMetrics;
  forwarder?: Forwarder;
  /** Starts provisioning workflows; without it the provision/teardown routes answer 503. */
  provisioning?: ProvisioningStarter;
}

export interface ApiApp {
  app: Express;
  cache: RoutingCache;
  metrics: ApiMetrics;
  /** Subscribes to `haru_route` so route moves reach this process at once. Throws if the database refuses. */
  start(): Promise<void>;
  /** Unsubscribes and closes upstream connections; the HTTP server is the caller's to close. */
  close(): Promise<void>;
}

/** Counts every request by matched route pattern (never the raw URL: fleet names would explode the labels). */
function requestMetrics(metrics: ApiMetrics): RequestHandler {
  return (req, res, next) => {
    const started = process.hrtime.bigint();
    res.on('close', () => {
      const route = req.route ? `${req.baseUrl}${String(req.route.path)}` : 'unmatched';
      const status = res.writableFinished || res.headersSent ? String(res.statusCode) : 'client_closed';
      metrics.httpRequests.inc({ route, method: req.method, status });
      metrics.httpDuration.observe({ route, method: req.method }, Number(process.hrtime.bigint() - started) / 1e9);
    });
    next();
  };
}

/**
 * Builds the API: health, OpenAPI and metrics open; everything under /v1 behind the bearer token; the
 * proxy routes read raw bodies, control routes strict JSON up to 16 KiB. Opens no socket.
 */
export function createApp(deps: ApiDeps): ApiApp {
  const { config, logger } = deps;
  const now = deps.now ?? (() => new Date());
  const metrics = deps.metrics ?? createApiMetrics();
  const forwarder = deps.forwarder ?? createForwarder();
  const cache = createRoutingCache({
    store: deps.store,
    ttlMs: config.HARU_SNAPSHOT_CACHE_TTL_MS,
    maxEntries: config.HARU_SNAPSHOT_CACHE_MAX,
    storeTimeoutMs: config.HARU_STORE_TIMEOUT_MS,
    now,
    logger,
    onRevision: (s) => metrics.routeRevision.set({ fleet: s.slug }, s.routeRevision),
  });
  const ctx: RouteContext = { ...deps, cache, metrics, now };
  const proxy: ProxyDeps = {
    cache,
    forwarder,
    holdQueue: createHoldQueue(config.HARU_CHAT_HOLD_MAX, (n) => metrics.heldRequests.set(n)),
    healthSignal: createHealthSignal({
      checkNow: (fleetId) => deps.orchestrator.checkNow(fleetId),
      debounceMs: config.HARU_CHECK_NOW_DEBOUNCE_MS,
      now,
      logger,
    }),
    metrics,
    logger,
    config,
    now,
  };
  const openapi = buildOpenApiDocument();

  const app = express();
  app.disable('x-powered-by');
  app.set('etag', false);
  const auth = bearerAuth(config.HARU_API_TOKEN);
  // The proxied POSTs skip Express entirely (api/proxy/lean.ts); everything else, and any other spelling
  // of those paths, goes through the stack below. `app` stays the Express app callers mount.
  const lean = leanInference({ deps: proxy, auth, readBody: inferenceBodyReader(config.HARU_CHAT_MAX_BODY_BYTES) });
  // `app(req, res)` calls `app.handle`, an undocumented but stable Express 5 method (the entry of every request).
  const entry = app as unknown as { handle: ExpressEntry };
  const expressHandle = entry.handle.bind(app);
  entry.handle = (req, res, callback) => {
    if (!lean(req, res)) expressHandle(req, res, callback);
  };
  app.use(requestMetrics(metrics));
  app.use(healthRoutes(ctx));
  app.get('/openapi.json', (_req, res) => {
    res.json(openapi);
  });
  app.get('/metrics', async (_req, res) => {
    res.set('content-type', metrics.registry.contentType).send(await metrics.registry.metrics());
  });
  app.use('/v1', auth);
  app.use(inferenceRoutes(proxy, config.HARU_CHAT_MAX_BODY_BYTES));
  app.use('/v1/fleets', express.json({ limit: CONTROL_BODY_LIMIT_BYTES, type: () => true, strict: true }));
  app.use(fleetRoutes(ctx));
  app.use(controlRoutes(ctx));
  app.use(pauseRoutes(ctx));
  app.use(operationRoutes(ctx));
  app.use(eventRoutes(ctx));
  app.use(provisioningRoutes(ctx, deps.provisioning));
  app.use(notFoundHandler);
  app.use(errorMiddleware(logger));

  let unlisten: (() => Promise<void>) | null = null;
  return {
    app,
    cache,
    metrics,
    async start() {
      unlisten ??= await deps.database.listen(ROUTE_CHANNEL, (payload) => cache.handlePush(payload));
    },
    async close() {
      const stop = unlisten;
      unlisten = null;
      await stop?.();
      await forwarder.close();
    },
  };
}
