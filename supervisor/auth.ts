import { createHash, timingSafeEqual } from 'node:crypto';
import type { RequestHandler } from 'express';
import { HaruError } from '../schemas/errors';

const digest = (value: string) => createHash('sha256').update(value).digest();

/**
 * Bearer-token check for /v1/*. The comparison is constant-time (both sides hashed to equal length first).
 * `token` null means unauthenticated mode: every request passes (the listener is then loopback-only).
 */
export function bearerAuth(token: string | null): RequestHandler {
  if (token === null) return (_req, _res, next) => next();
  const expected = digest(token);
  return (req, res, next) => {
    const header = req.headers.authorization ?? '';
    const match = /^Bearer\s+(.+)$/i.exec(header.trim());
    res.setHeader('WWW-Authenticate', 'Bearer');
    if (!match) return next(new HaruError('unauthorized', 'missing bearer token'));
    if (!timingSafeEqual(digest(match[1]!.trim()), expected)) {
      return next(new HaruError('unauthorized', 'invalid bearer token'));
    }
    res.removeHeader('WWW-Authenticate');
    next();
  };
}
