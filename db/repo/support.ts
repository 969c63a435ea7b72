import { sql, type SQL } from 'drizzle-orm';
import type { HaruDb } from '../client';

/** What every repository is built from: the drizzle database and the clock that stamps rows. */
export interface RepoDeps {
  db: HaruDb;
  now: () => Date;
}

const UUID_RE = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

/** True for a canonical UUID string. Lookups by id skip the query for anything else (it cannot match). */
export const isUuid = (value: string): boolean => UUID_RE.test(value);

/** The rows of a raw `db.execute` result: postgres.js returns an array, PGlite `{ rows }`. */
export function rowsOf<T>(result: unknown): T[] {
  if (Array.isArray(result)) return result as T[];
  return ((result as { rows?: T[] }).rows ?? []) as T[];
}

/** A timestamp parameter for raw SQL (drizzle strips postgres.js's Date serializer, so send ISO text). */
export const timestampParam = (at: Date): SQL => sql`${at.toISOString()}::timestamptz`;
