import { createHash, timingSafeEqual } from 'node:crypto';
import type { RequestHandler } from 'express';
import { HaruError } from '../schemas/errors';

const digest = (value: string) => createHash('sha256').update(value).digest();

/**
 * Bearer-token check for /v1/*. The comparison is constant-time (both sides hashed to equal length first).
 * `token` null means unauthenticated mode: every request passes (the listener is then loopback-only).
 * `alsoAccepted` holds tokens valid beside it, for a rotation's overlap window.
 */
export function bearerAuth(token: string | null, alsoAccepted: string[] = []): RequestHandler {
  if (token === null) return (_req, _res, next) => next();
  const expected = [token, ...alsoAccepted].map(digest);
  return (req, res, next) => {
    const header = req.headers.authorization ?? '';
    const match = /^Bearer\s+(.+)$/i.exec(header.trim());
    res.setHeader('WWW-Authenticate', 'Bearer');
    if (!match) return next(new HaruError('unauthorized', 'missing bearer token'));
    const given = digest(match[1]!.trim());
    // Every candidate is compared, so the time taken does not tell which one matched.
    if (!expected.map((e) => timingSafeEqual(given, e)).includes(true)) {
      return next(new HaruError('unauthorized', 'invalid bearer token'));
    }
    res.removeHeader('WWW-Authenticate');
    next();
  };
}
