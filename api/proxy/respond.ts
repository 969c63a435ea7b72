import type { ServerResponse } from 'node:http';
import type { HaruError } from '../../schemas/errors';

/**
 * Writes the error envelope `{ error: { code, message } }` on a plain Node response, byte for byte what
 * Express's `res.status(…).json(…)` sends (`application/json; charset=utf-8`, a length), with
 * Retry-After when the error names one and `WWW-Authenticate` on 401.
 */
export function sendErrorBody(res: ServerResponse, error: HaruError): void {
  const retryAfter = error.details?.retryAfterSeconds;
  if (typeof retryAfter === 'number') res.setHeader('retry-after', String(retryAfter));
  if (error.code === 'unauthorized') res.setHeader('www-authenticate', 'Bearer');
  const body = JSON.stringify(error.toBody());
  res.statusCode = error.status;
  res.setHeader('content-type', 'application/json; charset=utf-8');
  res.setHeader('content-length', Buffer.byteLength(body));
  res.end(body);
}
