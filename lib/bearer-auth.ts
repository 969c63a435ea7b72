import { hash, timingSafeEqual } from 'node:crypto';
import type { IncomingMessage, ServerResponse } from 'node:http';

/** Why a request was refused: no Bearer credentials at all, or a token that is not the configured one. */
export type BearerRefusal = 'missing bearer token' | 'invalid bearer token';

/** A connect-style middleware on Node's own request and response (Express accepts it as a RequestHandler). */
export type BearerMiddleware = (req: IncomingMessage, res: ServerResponse, next: (err?: unknown) => void) => void;

// One-shot: no Hash object per request (the check runs on every proxied request).
const digest = (value: string) => hash('sha256', value, 'buffer');

// RFC 6750: the scheme, case-insensitive, then one or more spaces and the token.
const BEARER_RE = /^Bearer +(.+)$/i;

/**
 * The check behind a bearer token: `null` when `authorization` (the header value) carries `token` or one of
 * `alsoAccepted` (tokens valid beside it during a rotation's overlap), else why not. Compares SHA-256
 * digests with `timingSafeEqual`, against every candidate, so neither a token's content, its length nor
 * which candidate matched leaks through timing.
 */
export function bearerCheck(
  token: string,
  alsoAccepted: readonly string[] = [],
): (authorization: string | undefined) => BearerRefusal | null {
  const expected = [token, ...alsoAccepted].map(digest);
  return (authorization) => {
    const presented = BEARER_RE.exec(authorization ?? '')?.[1]?.trim();
    if (!presented) return 'missing bearer token';
    const given = digest(presented);
    let match = false;
    // Every candidate is compared (no early exit), so which one matched does not show in the timing.
    for (const e of expected) match = timingSafeEqual(given, e) || match;
    return match ? null : 'invalid bearer token';
  };
}

/**
 * Bearer-token middleware (`alsoAccepted` as in `bearerCheck`). `token` undefined disables the check (the caller then listens on loopback only).
 * A refused request gets `WWW-Authenticate: Bearer` and goes to `next` with `refuse(reason)`, the caller's
 * own 401 error, which its error writer turns into the response.
 */
export function bearerAuth(
  token: string | undefined,
  refuse: (reason: BearerRefusal) => unknown,
  alsoAccepted: readonly string[] = [],
): BearerMiddleware {
  if (token === undefined) return (_req, _res, next) => next();
  const check = bearerCheck(token, alsoAccepted);
  return (req, res, next) => {
    const refusal = check(req.headers.authorization);
    if (refusal === null) return next();
    res.setHeader('www-authenticate', 'Bearer');
    next(refuse(refusal));
  };
}
