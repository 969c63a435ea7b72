import { hash, timingSafeEqual } from 'node:crypto';
import type { IncomingMessage, ServerResponse } from 'node:http';

/** Why a request was refused: no Bearer credentials at all, or a token that is not the configured one. */
export type BearerRefusal = 'missing bearer token' | 'invalid bearer token';

/** A connect-style middleware on Node's own request and response (Express accepts it as a RequestHandler). */
export type BearerMiddleware = (req: IncomingMessage, res: ServerResponse, next: (err?: unknown) => void) => void;

/**
 * The SHA-256 digest a token is compared by (a keys file may store it in place of the token). One-shot: no
 * Hash object per request (the check runs on every proxied request).
 */
export const tokenDigest = (value: string): Buffer => hash('sha256', value, 'buffer');

// RFC 6750: the scheme, case-insensitive, then one or more spaces and the token.
const BEARER_RE = /^Bearer +(.+)$/i;

/** One token a check accepts, by its SHA-256 digest, and what it stands for (a named key, or nothing). */
export interface BearerCandidate<T> {
  digest: Buffer;
  value: T;
}

/**
 * The check behind several tokens: which candidate `authorization` (the header value) carries, or why none.
 * The presented token's SHA-256 digest is compared with `timingSafeEqual` against every candidate, with no
 * early exit, so neither a token's content, its length nor which candidate matched leaks through timing.
 * Candidates' digests must differ (callers refuse duplicates where they load them).
 */
export function bearerIdentify<T>(
  candidates: readonly BearerCandidate<T>[],
): (authorization: string | undefined) => { value: T } | { refusal: BearerRefusal } {
  return (authorization) => {
    const presented = BEARER_RE.exec(authorization ?? '')?.[1]?.trim();
    if (!presented) return { refusal: 'missing bearer token' };
    const given = tokenDigest(presented);
    let found: BearerCandidate<T> | undefined;
    for (const c of candidates) {
      const equal = timingSafeEqual(given, c.digest);
      found = equal ? c : found;
    }
    return found ? { value: found.value } : { refusal: 'invalid bearer token' };
  };
}

/**
 * The check behind a bearer token: `null` when `authorization` carries `token` or one of `alsoAccepted`
 * (tokens valid beside it during a rotation's overlap), else why not (`bearerIdentify`'s comparison).
 */
export function bearerCheck(
  token: string,
  alsoAccepted: readonly string[] = [],
): (authorization: string | undefined) => BearerRefusal | null {
  const identify = bearerIdentify([token, ...alsoAccepted].map((t) => ({ digest: tokenDigest(t), value: true })));
  return (authorization) => {
    const found = identify(authorization);
    return 'refusal' in found ? found.refusal : null;
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
