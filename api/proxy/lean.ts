import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Request, RequestHandler, Response } from 'express';
import { toHaruError } from '../errors';
import { handleInference, type ProxyDeps } from './inference';
import { sendErrorBody } from './respond';
import type { InferenceEndpoint } from './route-table';

/** The proxied endpoints served before Express, by exact path (the Express routes serve every other spelling). */
const LEAN_PATHS = new Map<string, InferenceEndpoint>([
  ['/v1/chat/completions', 'chat/completions'],
  ['/v1/completions', 'completions'],
  ['/v1/embeddings', 'embeddings'],
]);

export interface LeanInferenceOptions {
  deps: ProxyDeps;
  /** The same bearer check as `/v1/*` in Express. */
  auth: RequestHandler;
  /** The same raw body reader as the Express inference routes (byte-identical Buffer, size cap). */
  readBody: RequestHandler;
}

/**
 * The hot path: `POST /v1/chat/completions`, `/v1/completions` and `/v1/embeddings` (exact path, any query
 * string) served without Express's routing, request decoration and middleware stack, which cost about as
 * much CPU per proxied request as Haru's own proxy code. Same auth, body reader, error envelope and
 * request metrics as the Express path. Returns false for every other request (the caller hands it to
 * Express).
 */
export function leanInference(opts: LeanInferenceOptions): (req: IncomingMessage, res: ServerResponse) => boolean {
  const { deps, auth, readBody } = opts;
  const { metrics, logger } = deps;
  return (req, res) => {
    if (req.method !== 'POST') return false;
    const url = req.url ?? '';
    const q = url.indexOf('?');
    const path = q < 0 ? url : url.slice(0, q);
    const endpoint = LEAN_PATHS.get(path);
    if (!endpoint) return false;

    const started = process.hrtime.bigint();
    // Labelled like the Express request metrics: the route pattern once matched, `unmatched` when auth failed.
    let route = 'unmatched';
    res.on('close', () => {
      const status = res.writableFinished || res.headersSent ? String(res.statusCode) : 'client_closed';
      metrics.httpRequests.inc({ route, method: 'POST', status });
      metrics.httpDuration.observe({ route, method: 'POST' }, Number(process.hrtime.bigint() - started) / 1e9);
    });
    const fail = (err: unknown) => {
      const error = toHaruError(err);
      if (error.code === 'internal_error') {
        logger.error('request failed', {
          method: 'POST',
          path,
          error: err instanceof Error ? err.message : String(err),
          stack: err instanceof Error ? err.stack : undefined,
        });
      }
      if (res.headersSent) res.destroy();
      else sendErrorBody(res, error);
    };
    // Both middlewares read only Node's own request fields (headers, the body stream).
    const request = req as Request;
    const response = res as Response;
    auth(request, response, (authError?: unknown) => {
      if (authError) return fail(authError);
      route = path;
      readBody(request, response, (bodyError?: unknown) => {
        if (bodyError) return fail(bodyError);
        handleInference(deps, endpoint, req, res, request.body).catch(fail);
      });
    });
    return true;
  };
}
