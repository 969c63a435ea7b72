import type { ServerResponse } from 'node:http';
import type { ErrorRequestHandler, RequestHandler } from 'express';
import { z } from 'zod';
import { StoreError, storeUnreachableCode } from '../db/store-error';
import type { Logger } from '../lib/logger';
import { formatZodError } from '../schemas/env';
import { type ErrorCode, HaruError } from '../schemas/errors';

/** Body-parser errors carry a `type`; the ones a client caused become 4xx codes. */
interface BodyParserError extends Error {
  type?: string;
  status?: number;
  limit?: number;
}

const NOT_FOUND_CODES = {
  fleet: 'fleet_not_found',
  domain: 'domain_not_found',
  operation: 'operation_not_found',
} as const satisfies Record<NonNullable<StoreError['entity']>, ErrorCode>;

/** The API code of a store refusal: a missing row is its `*_not_found`, a bad reference `invalid_target`. */
function storeErrorCode(err: StoreError): ErrorCode {
  switch (err.code) {
    case 'not_found':
      return err.entity ? NOT_FOUND_CODES[err.entity] : 'not_found';
    case 'invalid_reference':
      return 'invalid_target';
    case 'unavailable':
      return 'state_store_unavailable';
  }
}

/**
 * Maps anything thrown on a route to a HaruError: HaruError as-is, store refusals to their API codes,
 * body-parser limits to `payload_too_large`, malformed bodies and zod failures to `invalid_request`,
 * database connection failures to `state_store_unavailable`, the rest to `internal_error`.
 */
export function toHaruError(err: unknown): HaruError {
  if (err instanceof HaruError) return err;
  if (err instanceof StoreError) return new HaruError(storeErrorCode(err), err.message);
  if (err instanceof z.ZodError) return new HaruError('invalid_request', formatZodError(err));
  const storeCode = storeUnreachableCode(err);
  if (storeCode !== undefined) {
    return new HaruError('state_store_unavailable', `the state store is unavailable (${storeCode})`, { storeCode });
  }
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

/**
 * Writes the one error envelope `{ error: { code, message } }` on a Node response (Express's included):
 * `application/json; charset=utf-8` with a length, byte for byte what `res.status(…).json(…)` sends, and
 * Retry-After when the error names one.
 */
export function sendError(res: ServerResponse, error: HaruError): void {
  const retryAfter = error.details?.retryAfterSeconds;
  if (typeof retryAfter === 'number') res.setHeader('retry-after', String(retryAfter));
  const body = JSON.stringify(error.toBody());
  res.statusCode = error.status;
  res.setHeader('content-type', 'application/json; charset=utf-8');
  res.setHeader('content-length', Buffer.byteLength(body));
  res.end(body);
}

/**
 * Logs what a failed request needs a human for: an `internal_error` (a bug) with its stack at error level,
 * a store that cannot serve at warn level with the code that said so (a SQLSTATE such as 53300, or a socket
 * code). Other errors are the client's or an upstream's and are only counted.
 */
export function logRequestError(
  logger: Logger,
  error: HaruError,
  err: unknown,
  request: Record<string, unknown>,
): void {
  if (error.code === 'internal_error') {
    logger.error('request failed', {
      ...request,
      error: err instanceof Error ? err.message : String(err),
      stack: err instanceof Error ? err.stack : undefined,
    });
  } else if (error.code === 'state_store_unavailable' && error.details?.storeCode !== undefined) {
    logger.warn('state store unavailable', { ...request, code: error.details.storeCode });
  }
}

/**
 * Answers a request that failed with `err`: logs it (`logRequestError`), then writes the envelope, or cuts
 * the connection when headers already went out (a stream: the status is gone).
 */
export function failRequest(
  res: ServerResponse,
  err: unknown,
  logger: Logger,
  request: { method: string; path: string },
): void {
  const error = toHaruError(err);
  logRequestError(logger, error, err, request);
  if (res.headersSent) res.destroy();
  else sendError(res, error);
}

/** The Express error middleware: `failRequest` for the Express routes. */
export function errorMiddleware(logger: Logger): ErrorRequestHandler {
  return (err: unknown, req, res, _next) => failRequest(res, err, logger, { method: req.method, path: req.path });
}

/** The fallback for unknown routes: 404 `not_found` in the envelope. */
export const notFoundHandler: RequestHandler = (req, _res, next) => {
  next(new HaruError('not_found', `no route ${req.method} ${req.path}`));
};
