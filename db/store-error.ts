import { causeCode } from '../lib/error-cause';

/**
 * What a store call can refuse with, independent of who called it (the API maps these to HTTP codes,
 * the activities to Temporal failure types):
 * - `not_found`: the row named by id does not exist (or belongs to another fleet); `entity` says which.
 * - `invalid_reference`: the input names something that cannot take part (a domain of another fleet, a malformed id).
 * - `unavailable`: the store could not do it now (a row lock held elsewhere); the same call may succeed later.
 */
export const STORE_ERROR_CODES = ['not_found', 'invalid_reference', 'unavailable'] as const;
export type StoreErrorCode = (typeof STORE_ERROR_CODES)[number];

/** The rows a `not_found` can be about. */
export type StoreEntity = 'fleet' | 'domain' | 'operation';

/** An error the store throws on purpose; anything else from `db/` is a driver error or a bug. */
export class StoreError extends Error {
  constructor(
    readonly code: StoreErrorCode,
    message: string,
    /** Which kind of row was missing, for `not_found`. */
    readonly entity?: StoreEntity,
  ) {
    super(message);
    this.name = 'StoreError';
  }
}

/** SQLSTATE codes are five digits or capitals; postgres.js's own codes (CONNECTION_CLOSED…) are not. */
const SQLSTATE_RE = /^[0-9A-Z]{5}$/;

/** The SQLSTATE of a database error, looking through drizzle's query-error wrapper; undefined for none. */
export const pgErrorCode = (err: unknown): string | undefined => causeCode(err, (code) => SQLSTATE_RE.test(code));

// postgres.js and socket error codes.
const STORE_DOWN_CODES = new Set([
  'ECONNREFUSED',
  'ECONNRESET',
  'ETIMEDOUT',
  'EPIPE',
  'CONNECTION_CLOSED',
  'CONNECTION_ENDED',
  'CONNECTION_DESTROYED',
  'CONNECT_TIMEOUT',
]);

/**
 * SQLSTATEs that say the database cannot serve now, whatever the query: class 08 (connection exception),
 * 57P01-57P05 (shutdown, crash, starting up, database dropped, idle session timeout), 53300 (too many
 * connections), 55000 (object not in prerequisite state: a server or pooler refusing connections), 25006
 * (read-only transaction: the primary is now a replica after a managed failover).
 */
const isUnavailableSqlState = (code: string): boolean =>
  code.startsWith('08') || /^57P0[1-5]$/.test(code) || code === '53300' || code === '55000' || code === '25006';

/**
 * The code (SQLSTATE or driver/socket code) that says the database could not be reached or cannot serve,
 * looking through `cause`; undefined when `err` is a query that failed for its own reasons.
 */
export const storeUnreachableCode = (err: unknown): string | undefined =>
  causeCode(err, (code) => STORE_DOWN_CODES.has(code) || (SQLSTATE_RE.test(code) && isUnavailableSqlState(code)));

/** True when `err` says the database could not be reached or cannot serve now (as opposed to a query that failed). */
export const isStoreUnreachable = (err: unknown): boolean => storeUnreachableCode(err) !== undefined;
