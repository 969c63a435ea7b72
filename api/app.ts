import type { RequestListener } from 'node:http';
import express, { type Express, type RequestHandler } from 'express';
import type { Logger } from '../lib/logger';
import { ROUTE_CHANNEL } from '../schemas/route-push';
import { HaruError } from '../schemas/errors';
import { createAuthorizer, installRouteGuards } from './auth/authorize';
import { keyNameOf } from './auth/principal';
import { type ApiConfig, apiKeysOf } from './config';
import { errorMiddleware, notFoundHandler } from './errors';
import { type ApiMetrics, createApiMetrics, observeRequest } from './metrics';
import { registerFleetMetrics } from './fleet-metrics';
import { buildOpenApiDocument, ROUTE_DOCS } from './openapi';
import type { Orchestrator } from './orchestrator';
import { createForwarder, type Forwarder } from './proxy/forwarder';
import { createMonitorSignals } from './proxy/monitor-signals';
import { createBodyBudget, LARGEST_BODIES_HELD } from './proxy/body-budget';
import { createHoldQueue } from './proxy/hold-queue';
import { createInFlightRegistry } from './proxy/in-flight';
import type { ProxyDeps } from './proxy/inference';
import { leanInference } from './proxy/lean';
import { createRoutingCache, type RoutingCache } from './proxy/routing-cache';
import { createSleepCheck } from './proxy/sleep-check';
import type { RouteContext } from './routes/context';
import { controlRoutes } from './routes/control';
import { pauseRoutes } from './routes/pause';
import { repairRoutes } from './routes/repair';
import { eventRoutes } from './routes/events';
import { fleetRoutes } from './routes/fleets';
import { healthRoutes } from './routes/health';
import { inferenceRoutes } from './routes/inference';
import { operationRoutes } from './routes/operations';
import { type ProvisioningStarter, provisioningRoutes } from './routes/provisioning';
import { type HostReader, statusRoutes } from './routes/status';
import { trainingJobRoutes } from './routes/training-jobs';
import { uiRoutes } from './routes/ui';
import { createSupervisorClient } from '../clients/supervisor-client';
import type { ApiDatabase, ApiStore } from './store';

/** Control bodies are small JSON documents (docs/architecture.md §5.3). */
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
  /** Reads supervisors for the domain status route; by default a client with HARU_SUPERVISOR_TOKEN and TLS. */
  hosts?: HostReader;
}

export interface ApiApp {
  /** The server entry: `http.createServer(api.handle)`. Serves the lean proxy path, hands the rest to `router`. */
  handle: RequestListener;
  /** The Express routes behind `handle` (every route, the proxied ones too); serve `handle`, not this. */
  router: Express;
  cache: RoutingCache;
  metrics: ApiMetrics;
  /** Subscribes to `haru_route` so route moves reach this process at once. Throws if the database refuses. */
  start(): Promise<void>;
  /** Ends long-lived answers (event follows) so a closing HTTP server can finish; idempotent. */
  endStreams(): void;
  /** Ends long-lived answers, unsubscribes and closes upstream connections; the HTTP server is the caller's to close. */
  close(): Promise<void>;
}

/** A fleet a key limited to fleets names but the store does not know: refused like any other fleet. */
const ignoreUnknownFleet = (err: unknown): null => {
  if (err instanceof HaruError && err.code === 'fleet_not_found') return null;
  throw err;
};

/** Counts and logs every Express request by the route pattern it matched (`unmatched` when none did). */
function requestMetrics(metrics: ApiMetrics, logger: Logger): RequestHandler {
  return (req, res, next) => {
    observeRequest(
      metrics,
      req.method,
      res,
      () => (req.route ? `${req.baseUrl}${String(req.route.path)}` : 'unmatched'),
      {
        logger,
        params: () => req.params as { fleet?: string; domain?: string },
        key: () => keyNameOf(req),
      },
    );
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
    storeTimeoutMs: config.HARU_STORE_TIMEOUT_MS,
    now,
    logger,
    onRevision: (s) => {
      metrics.routeRevision.set({ fleet: s.slug }, s.routeRevision);
      // Stale answers only come for a fleet loaded before: its counter is at 0 by then (HaruRouteStale's rate).
      metrics.staleRouting.inc({ fleet: s.slug }, 0);
    },
  });
  const shutdown = new AbortController();
  // Once per registry: a test may build several apps on one.
  if (!metrics.registry.getSingleMetric('haru_domain_state'))
    registerFleetMetrics(metrics.registry, () => deps.store.fleets.list(), logger);
  const ctx: RouteContext = { ...deps, cache, metrics, now, shutdown: shutdown.signal };
  const proxy: ProxyDeps = {
    cache,
    forwarder,
    holdQueue: createHoldQueue(config.HARU_CHAT_HOLD_MAX, (n) => metrics.heldRequests.set(n)),
    bodyBudget: createBodyBudget(LARGEST_BODIES_HELD * config.HARU_CHAT_MAX_BODY_BYTES),
    inFlight: createInFlightRegistry({ cache, logger }),
    monitorSignals: createMonitorSignals({
      checkNow: (fleetId) => deps.orchestrator.checkNow(fleetId),
      announceServedAnswer:
        deps.store.domains && ((domainId, at) => deps.store.domains!.announceServedAnswer(domainId, at)),
      announceMissedAnswer:
        deps.store.domains && ((domainId, at, why) => deps.store.domains!.announceMissedAnswer(domainId, at, why)),
      now,
      logger,
    }),
    sleepCheck: createSleepCheck({ ttlMs: config.HARU_SNAPSHOT_CACHE_TTL_MS, timeoutMs: config.HARU_STORE_TIMEOUT_MS }),
    metrics,
    logger,
    config,
    now,
  };
  const openapi = buildOpenApiDocument();

  const app = express();
  app.disable('x-powered-by');
  app.set('etag', false);
  const authorizer = createAuthorizer(ROUTE_DOCS, {
    keys: apiKeysOf(config),
    resolveFleet: (ref) => cache.get(ref).then(({ snapshot }) => snapshot, ignoreUnknownFleet),
    defaultFleet: config.HARU_DEFAULT_FLEET,
  });
  // The proxied POSTs skip Express entirely (api/proxy/lean.ts); everything else, and any other spelling
  // of those paths, goes through the Express stack below. Their guard is the route's own, found by path.
  const lean = leanInference({
    deps: proxy,
    auth: (req, res, next) =>
      authorizer.authenticate(req, res, (err) =>
        err ? next(err) : authorizer.guardFor('post', (req.url ?? '').split('?')[0]!)(req, res, next),
      ),
    maxBodyBytes: config.HARU_CHAT_MAX_BODY_BYTES,
  });
  const handle: RequestListener = (req, res) => {
    if (!lean(req, res)) app(req, res);
  };
  app.use(requestMetrics(metrics, logger));
  app.use(healthRoutes(ctx));
  app.get('/openapi.json', (_req, res) => {
    res.json(openapi);
  });
  app.get('/metrics', async (_req, res) => {
    res.set('content-type', metrics.registry.contentType).send(await metrics.registry.metrics());
  });
  const hosts =
    deps.hosts ?? createSupervisorClient({ token: config.HARU_SUPERVISOR_TOKEN, tls: config.supervisorTls });
  app.use('/ui', authorizer.authenticatePage);
  app.use(uiRoutes(ctx, { holdQueue: proxy.holdQueue, hosts, allows: authorizer.allows }));
  app.use('/v1', authorizer.authenticate);
  app.use(inferenceRoutes(proxy, config.HARU_CHAT_MAX_BODY_BYTES));
  app.use('/v1/fleets', express.json({ limit: CONTROL_BODY_LIMIT_BYTES, type: () => true, strict: true }));
  app.use(fleetRoutes(ctx, authorizer.allows));
  app.use(controlRoutes(ctx));
  app.use(pauseRoutes(ctx));
  app.use(repairRoutes(ctx));
  app.use(operationRoutes(ctx));
  app.use(eventRoutes(ctx));
  app.use(statusRoutes(ctx, hosts));
  app.use(provisioningRoutes(ctx, deps.provisioning));
  app.use(trainingJobRoutes(ctx));
  app.use(notFoundHandler);
  app.use(errorMiddleware(logger));
  // Last: every route is registered, each gets the guard of the scope its RouteDoc declares.
  installRouteGuards(app, authorizer);

  let unlisten: (() => Promise<void>) | null = null;
  return {
    handle,
    router: app,
    cache,
    metrics,
    async start() {
      unlisten ??= await deps.database.listen(ROUTE_CHANNEL, (payload) => cache.handlePush(payload));
    },
    endStreams() {
      shutdown.abort();
    },
    async close() {
      shutdown.abort();
      const stop = unlisten;
      unlisten = null;
      await stop?.();
      proxy.inFlight.close();
      await forwarder.close();
    },
  };
}
