import { type RequestHandler, Router } from 'express';
import { HaruError } from '../../schemas/errors';
import type { BodyBudget } from '../proxy/body-budget';
import { readProxyBody } from '../proxy/body-reader';
import { inferenceHandler, type ProxyDeps, requestFleet, routingHeaders } from '../proxy/inference';
import { activeDomain, domainModels } from '../proxy/route-table';

/**
 * The proxy's body reader as Express middleware (`req.body`): the raw Buffer, byte for byte, capped at
 * `maxBodyBytes` for both sized and chunked bodies, its bytes taken from the process's body budget from the first
 * read until the response closes (429 past it). No inflate: the bytes forwarded are the bytes received (an
 * encoded body is refused, not decoded). The same reader as the lean path's (api/proxy/body-reader.ts).
 */
export const inferenceBodyReader =
  (maxBodyBytes: number, budget: BodyBudget): RequestHandler =>
  (req, res, next) =>
    readProxyBody(req, res, maxBodyBytes, budget, (err, body) => {
      if (err) return next(err);
      req.body = body;
      next();
    });

/**
 * The OpenAI-compatible surface: three proxied POST endpoints and `GET /v1/models`. Bodies are read raw
 * (a byte-identical Buffer, capped at HARU_CHAT_MAX_BODY_BYTES for both sized and chunked bodies).
 */
export function inferenceRoutes(deps: ProxyDeps, maxBodyBytes: number): Router {
  const router = Router();
  const raw = inferenceBodyReader(maxBodyBytes, deps.bodyBudget);
  router.post('/v1/chat/completions', raw, inferenceHandler(deps, 'chat/completions'));
  router.post('/v1/completions', raw, inferenceHandler(deps, 'completions'));
  router.post('/v1/embeddings', raw, inferenceHandler(deps, 'embeddings'));

  // Answered from routing, not from an upstream: the names a client may send right now.
  router.get('/v1/models', async (req, res) => {
    const routing = await deps.cache.get(requestFleet(req, deps.config.HARU_DEFAULT_FLEET));
    const active = activeDomain(routing.snapshot);
    if (!active) throw new HaruError('no_active_domain', `fleet ${routing.snapshot.slug} has no active domain`);
    const created = Math.floor(Date.parse(routing.snapshot.createdAt) / 1000) || 0;
    res.set(routingHeaders(routing, active.slug)).json({
      object: 'list',
      // Only what may take traffic now: a failed active or a sleeping slot lists nothing.
      data: [...domainModels(active, true).keys()].map((id) => ({ id, object: 'model', created, owned_by: 'haru' })),
    });
  });
  return router;
}
