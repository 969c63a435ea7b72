import { HaruError } from '../schemas/errors';

/**
 * Resolves like `promise`, or rejects with HaruError `state_store_unavailable` after `ms`. The store call
 * itself keeps running; only the request stops waiting for it.
 */
export function storeDeadline<T>(promise: Promise<T>, ms: number, what = 'the state store'): Promise<T> {
  return new Promise<T>((resolve, reject) => {
    const timer = setTimeout(
      () => reject(new HaruError('state_store_unavailable', `${what} did not answer within ${ms} ms`)),
      ms,
    );
    promise.then(
      (v) => {
        clearTimeout(timer);
        resolve(v);
      },
      (err: unknown) => {
        clearTimeout(timer);
        reject(err);
      },
    );
  });
}

// postgres.js and socket error codes, and SQLSTATE classes 08 (connection) and 57P (shutdown).
const STORE_DOWN_CODES = new Set([
  'ECONNREFUSED',
  'ECONNRESET',
  'ETIMEDOUT',
  'EPIPE',
  'CONNECTION_CLOSED',
  'CONNECTION_ENDED',
  'CONNECTION_DESTROYED',
  'CONNECT_TIMEOUT',
  '57P01',
  '57P02',
  '57P03',
]);

/** True when `err` says the database could not be reached (as opposed to a query that failed). */
export function isStoreUnreachable(err: unknown): boolean {
  for (let e = err as { code?: unknown; cause?: unknown } | undefined, i = 0; e && i < 5; i++) {
    if (typeof e.code === 'string' && (STORE_DOWN_CODES.has(e.code) || e.code.startsWith('08'))) return true;
    e = e.cause as typeof e;
  }
  return false;
}
