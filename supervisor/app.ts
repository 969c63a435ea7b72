import express, { type ErrorRequestHandler, type Request, type RequestHandler } from 'express';
import type { z } from 'zod';
import { bearerAuth } from '../lib/bearer-auth';
import type { Logger } from '../lib/logger';
import { formatZodError } from '../schemas/env';
import { HaruError } from '../schemas/errors';
import { fingerprintRequestSchema, scoreRequestSchema } from '../schemas/fingerprint';
import {
  gpuMemoryQuerySchema,
  type GpuMemoryReport,
  probeRequestSchema,
  sleepRequestSchema,
  type SupervisorConfig,
  type SupervisorStatus,
  trainingStartRequestSchema,
  trainingStopRequestSchema,
  wakeRequestSchema,
} from '../schemas/supervisor';
import { NoSlotError } from './errors';
import { GpuQueryError, type SharedGpuReader } from './gpu';
import { createGpuExclusion } from './gpu-exclusion';
import type { InferenceController } from './inference';
import { legacyRoutes } from './legacy-routes';
import type { ListenerTable } from './listeners';
import type { SupervisorMetrics } from './metrics';
import { withModelMemory } from './model-memory';
import { scoreAnswers, takeFingerprints } from './fingerprint';
import { probeModels } from './probe';
import type { StatusView } from './status-view';
import type { TrainingManager } from './training';
import type { VllmClient } from './vllm';

export interface SupervisorAppDeps {
  /** Bearer token for /v1/*; null = unauthenticated (the caller must listen on loopback only). */
  token: string | null;
  /** Tokens accepted beside `token` while a rotation overlaps (HARU_SUPERVISOR_TOKEN_PREVIOUS). */
  previousTokens?: string[];
  inference: InferenceController;
  training: TrainingManager;
  gpu: SharedGpuReader;
  /** The config, for the models configured on each GPU. */
  config: SupervisorConfig;
  listeners: ListenerTable;
  vllm: VllmClient;
  /** What /v1/status answers from (refreshed in the background; never waits on a slow vLLM). */
  statusView: StatusView;
  metrics: SupervisorMetrics;
  logger: Logger;
  now: () => Date;
  /** Training stop grace when the request gives none. */
  defaultStopGraceMs: number;
}

/** Request bodies are small JSON objects; anything bigger is a 413. */
const BODY_LIMIT = '16kb';

function parseBody<T extends z.ZodType>(schema: T, req: Request): z.infer<T> {
  const parsed = schema.safeParse(req.body ?? {});
  if (!parsed.success) throw new HaruError('invalid_request', formatZodError(parsed.error));
  return parsed.data;
}

/** Wraps an async handler so a rejection reaches the error middleware. */
const route =
  (handler: (req: Request, res: express.Response) => Promise<void> | void): RequestHandler =>
  async (req, res, next) => {
    try {
      await handler(req, res);
    } catch (err) {
      next(err);
    }
  };

/**
 * The supervisor's HTTP API (docs/architecture.md §6.2). `/healthz` and `/metrics` are open; every `/v1/*` route needs the
 * bearer token when one is configured. Bodies are strict JSON (unknown keys are a 400); errors use the
 * `{ error: { code, message } }` envelope.
 */
export function createApp(deps: SupervisorAppDeps): express.Express {
  const { inference, training, gpu, metrics, logger, now } = deps;
  // Wakes and training starts go through the exclusion: never an engine and a trainer on one GPU's memory.
  const exclusion = createGpuExclusion({ config: deps.config, inference, training, vllm: deps.vllm });
  const app = express();
  app.disable('x-powered-by');
  // Every answer is a fresh reading: an ETag (a hash of each body) would cost a status read CPU for nothing.
  app.set('etag', false);

  app.use((req, res, next) => {
    const end = metrics.httpDuration.startTimer();
    res.on('finish', () => {
      const path = req.route?.path ? `${req.baseUrl}${String(req.route.path)}` : 'unmatched';
      metrics.httpRequests.inc({ method: req.method, route: path, status: String(res.statusCode) });
      end({ method: req.method, route: path });
    });
    next();
  });

  app.get('/healthz', (_req, res) => {
    res.json({ status: 'ok' });
  });
  app.get(
    '/metrics',
    route(async (_req, res) => {
      res.type(metrics.registry.contentType).send(await metrics.registry.metrics());
    }),
  );

  const v1 = express.Router();
  v1.use(bearerAuth(deps.token ?? undefined, (reason) => new HaruError('unauthorized', reason), deps.previousTokens));
  v1.use(express.json({ type: () => true, limit: BODY_LIMIT }));

  v1.get(
    '/status',
    route(async (_req, res) => {
      const models = await deps.statusView.snapshot();
      metrics.observeModels(models);
      const body: SupervisorStatus = { models, training: training.status(), at: now().toISOString() };
      res.json(body);
    }),
  );
  v1.post(
    '/vllm/sleep',
    route(async (req, res) => {
      res.json(await inference.sleep(parseBody(sleepRequestSchema, req)));
    }),
  );
  v1.post(
    '/vllm/wake',
    route(async (req, res) => {
      res.json(await exclusion.wake(parseBody(wakeRequestSchema, req)));
    }),
  );
  v1.post(
    '/training/start',
    route(async (req, res) => {
      res.json(await exclusion.startTraining(parseBody(trainingStartRequestSchema, req)));
    }),
  );
  v1.post(
    '/training/stop',
    route(async (req, res) => {
      const body = parseBody(trainingStopRequestSchema, req);
      const answer = training.stop({ gpuIndex: body.gpuIndex, graceMs: body.graceMs ?? deps.defaultStopGraceMs });
      if (body.waitMs) {
        let timer: NodeJS.Timeout | undefined;
        await Promise.race([
          Promise.all(answer.gpuIndexes.map((gpuIndex) => training.idle(gpuIndex))),
          new Promise((resolve) => (timer = setTimeout(resolve, body.waitMs))),
        ]);
        clearTimeout(timer);
      }
      res.status(202).json(answer);
    }),
  );
  v1.get(
    '/gpu/memory',
    route(async (req, res) => {
      const query = gpuMemoryQuerySchema.safeParse(req.query);
      if (!query.success) throw new HaruError('invalid_request', formatZodError(query.error));
      let reading;
      try {
        const { maxAgeMs, since } = query.data;
        // `since` is a time of this host's own clock (a trainer's end from its status), compared with the time of
        // the same clock at which each run of the tool started.
        reading = await gpu.read({ maxAgeMs, startedSinceMs: since === undefined ? undefined : Date.parse(since) });
      } catch (err) {
        metrics.gpuQueryErrors.inc();
        throw err;
      }
      const { gpus, ageMs } = reading;
      if (ageMs === 0) metrics.observeGpus(gpus);
      const trainerPids = new Set(training.status().flatMap((r) => r.pids));
      const body: GpuMemoryReport = {
        gpus: withModelMemory(gpus, deps.config, deps.listeners, trainerPids),
        at: new Date(now().getTime() - ageMs).toISOString(),
      };
      res.json(body);
    }),
  );
  /** The configured models named (all when `names` is absent); a name this host does not serve is a 404. */
  const servedModels = (names: readonly string[] | undefined) => {
    const unknown = (names ?? []).filter((name) => !inference.models.some((m) => m.name === name));
    if (unknown.length) throw new HaruError('model_not_found', `not served on this host: ${unknown.join(', ')}`);
    return inference.models.filter((m) => !names || names.includes(m.name));
  };
  v1.post(
    '/probe',
    route(async (req, res) => {
      const body = parseBody(probeRequestSchema, req);
      const models = servedModels(body.models);
      const results = await probeModels({ ...body, models }, { vllm: deps.vllm, now });
      for (const r of results.filter((x) => !x.ok)) logger.warn('probe failed', { model: r.model, error: r.error });
      res.json({ results });
    }),
  );
  v1.post(
    '/fingerprint',
    route(async (req, res) => {
      const body = parseBody(fingerprintRequestSchema, req);
      const taken = await takeFingerprints({ ...body, models: servedModels(body.models) }, deps);
      const ports = new Map(inference.models.map((m) => [m.name, m.port]));
      const results = taken.map((r) => ({
        ...r,
        serverPid: deps.listeners.servingPids(ports.get(r.model)!)[0] ?? null,
      }));
      for (const r of results.filter((x) => !x.ok))
        logger.warn('fingerprint failed', { model: r.model, error: r.error });
      res.json({ results });
    }),
  );
  v1.post(
    '/fingerprint/score',
    route(async (req, res) => {
      const body = parseBody(scoreRequestSchema, req);
      const served = servedModels(body.answers.map((a) => a.model));
      const answers = body.answers.map((a) => ({ ...a, ...served.find((m) => m.name === a.model)! }));
      res.json({ results: await scoreAnswers({ ...body, answers }, deps) });
    }),
  );
  // The original project's `/v1/ready` and `/v1/training/status`, as aliases (supervisor/legacy-routes.ts).
  v1.use(legacyRoutes(deps));
  app.use('/v1', v1);

  app.use((req, _res, next) => next(new HaruError('not_found', `no route ${req.method} ${req.path}`)));
  app.use(errorHandler(logger));
  return app;
}

function errorHandler(logger: Logger): ErrorRequestHandler {
  return (err: unknown, req, res, _next) => {
    let error: HaruError;
    const bodyError = err as { type?: string; message?: string };
    if (err instanceof HaruError) error = err;
    else if (err instanceof NoSlotError) error = new HaruError('not_found', err.message);
    else if (bodyError.type === 'entity.parse.failed')
      error = new HaruError('invalid_request', 'body is not valid JSON');
    else if (bodyError.type === 'entity.too.large')
      error = new HaruError('payload_too_large', `body over ${BODY_LIMIT}`);
    else if (err instanceof GpuQueryError) {
      logger.error('gpu query failed', { error: err.message });
      error = new HaruError('internal_error', err.message);
    } else {
      logger.error('request failed', { method: req.method, path: req.path, error: (err as Error)?.message });
      error = new HaruError('internal_error', 'internal error');
    }
    res.status(error.status).json(error.toBody());
  };
}
