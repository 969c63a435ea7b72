import type { IncomingMessage, ServerResponse } from 'node:http';
import type { BearerMiddleware } from '../../lib/bearer-auth';
import { keyNameOf } from '../auth/principal';
import { failRequest } from '../errors';
import { observeRequest } from '../metrics';
import { readProxyBody } from './body-reader';
import { handleInference, type ProxyDeps } from './inference';
import type { InferenceEndpoint } from '../../core/serving-url';

/** The proxied endpoints served before Express, by exact path (the Express routes serve every other spelling). */
const LEAN_PATHS = new Map<string, InferenceEndpoint>([
  ['/v1/chat/completions', 'chat/completions'],
  ['/v1/completions', 'completions'],
  ['/v1/embeddings', 'embeddings'],
]);

export interface LeanInferenceOptions {
  deps: ProxyDeps;
  /** The same bearer check as `/v1/*` in Express, then the route's own scope and fleet guard. */
  auth: BearerMiddleware;
  /** The body cap (HARU_CHAT_MAX_BODY_BYTES), read by the same reader as the Express inference routes. */
  maxBodyBytes: number;
}

/**
 * The hot path: `POST /v1/chat/completions`, `/v1/completions` and `/v1/embeddings` (exact path, any query
 * string) served without Express's routing, request decoration and middleware stack, which cost about as
 * much CPU per proxied request as Haru's own proxy code. Same auth, body reader, error writer and
 * request metrics as the Express path. Returns false for every other request, untouched (the server
 * entry in api/app.ts then hands it to Express).
 */
export function leanInference(opts: LeanInferenceOptions): (req: IncomingMessage, res: ServerResponse) => boolean {
  const { deps, auth, maxBodyBytes } = opts;
  const { metrics, logger } = deps;
  return (req, res) => {
    if (req.method !== 'POST') return false;
    const url = req.url ?? '';
    const q = url.indexOf('?');
    const path = q < 0 ? url : url.slice(0, q);
    const endpoint = LEAN_PATHS.get(path);
    if (!endpoint) return false;

    // Labelled like the Express request metrics: the route pattern once matched, `unmatched` when auth failed.
    let route = 'unmatched';
    observeRequest(metrics, 'POST', res, () => route, { logger, key: () => keyNameOf(req) });
    const fail = (err: unknown) => failRequest(res, err, logger, { method: 'POST', path });
    auth(req, res, (authError?: unknown) => {
      if (authError) return fail(authError);
      route = path;
      readProxyBody(req, res, maxBodyBytes, deps.bodyBudget, (bodyError, body) => {
        if (bodyError) return fail(bodyError);
        handleInference(deps, endpoint, req, res, body).catch(fail);
      });
    });
    return true;
  };
}
