import type { ErrorRequestHandler, RequestHandler } from 'express';
import { z } from 'zod';
import { formatZodError } from '../schemas/env';
import { HaruError } from '../schemas/errors';
import type { Logger } from './logger';
import { isStoreUnreachable } from './timeout';

/** Body-parser errors carry a `type`; the ones a client caused become 4xx codes. */
interface BodyParserError extends Error {
  type?: string;
  status?: number;
  limit?: number;
}

/**
 * Maps anything thrown on a route to a HaruError: HaruError as-is, body-parser limits to
 * `payload_too_large`, malformed bodies and zod failures to `invalid_request`, database connection
 * failures to `state_store_unavailable`, the rest to `internal_error`.
 */
export function toHaruError(err: unknown): HaruError {
  if (err instanceof HaruError) return err;
  if (err instanceof z.ZodError) return new HaruError('invalid_request', formatZodError(err));
  if (isStoreUnreachable(err)) return new HaruError('state_store_unavailable', 'the state store is unreachable');
  const e = err as BodyParserError;
  if (e?.type === 'entity.too.large') {
    return new HaruError('payload_too_large', `request body exceeds the limit of ${e.limit ?? '?'} bytes`);
  }
  if (e?.type === 'entity.parse.failed') return new HaruError('invalid_request', 'request body is not valid JSON');
  if (typeof e?.status === 'number' && e.status >= 400 && e.status < 500 && e.type) {
    return new HaruError('invalid_request', e.message);
  }
  return new HaruError('internal_error', 'internal error');
}

/** Writes the one error envelope `{ error: { code, message } }`, with Retry-After when the error names one. */
export function sendError(res: Parameters<RequestHandler>[1], error: HaruError): void {
  const retryAfter = error.details?.retryAfterSeconds;
  if (typeof retryAfter === 'number') res.setHeader('retry-after', String(retryAfter));
  if (error.code === 'unauthorized') res.setHeader('www-authenticate', 'Bearer');
  res.status(error.status).json(error.toBody());
}

/** The error middleware. After headers went out (a stream) it can only cut the connection. */
export function errorMiddleware(logger: Logger): ErrorRequestHandler {
  return (err: unknown, req, res, _next) => {
    const error = toHaruError(err);
    if (error.code === 'internal_error') {
      logger.error('request failed', {
        method: req.method,
        path: req.path,
        error: err instanceof Error ? err.message : String(err),
        stack: err instanceof Error ? err.stack : undefined,
      });
    }
    if (res.headersSent) {
      res.destroy();
      return;
    }
    sendError(res, error);
  };
}

/** The fallback for unknown routes: 404 `not_found` in the envelope. */
export const notFoundHandler: RequestHandler = (req, _res, next) => {
  next(new HaruError('not_found', `no route ${req.method} ${req.path}`));
};
