import { createHash, timingSafeEqual } from 'node:crypto';
import type { RequestHandler } from 'express';
import { HaruError } from '../schemas/errors';

const digest = (value: string) => createHash('sha256').update(value, 'utf8').digest();

/**
 * Bearer-token check for `/v1/*`. Compares SHA-256 digests with `timingSafeEqual` so neither the
 * token's content nor its length leaks through timing. `token` undefined disables the check (main.ts
 * then binds to loopback only and warns). Failure: 401 `unauthorized`.
 */
export function bearerAuth(token: string | undefined): RequestHandler {
  if (token === undefined) return (_req, _res, next) => next();
  const expected = digest(token);
  return (req, _res, next) => {
    const header = req.headers.authorization ?? '';
    const match = /^Bearer[ ]+(.+)$/i.exec(header);
    const presented = match?.[1]?.trim() ?? '';
    if (presented && timingSafeEqual(digest(presented), expected)) return next();
    next(new HaruError('unauthorized', header ? 'invalid bearer token' : 'missing bearer token'));
  };
}
