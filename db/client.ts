import { PGlite } from '@electric-sql/pglite';
import type { PgDatabase, PgQueryResultHKT } from 'drizzle-orm/pg-core';
import { drizzle as drizzlePglite } from 'drizzle-orm/pglite';
import { drizzle as drizzlePostgres } from 'drizzle-orm/postgres-js';
import postgres from 'postgres';
import { lockDataDir } from './pglite-lock';
import {
  explainPostgresTlsError,
  postgresConnectTarget,
  type PostgresConnectTarget,
  type PostgresTlsEnv,
} from './postgres-tls';
import * as schema from './schema';

export type HaruSchema = typeof schema;
/** The drizzle database, whichever driver is underneath. */
export type HaruDb = PgDatabase<PgQueryResultHKT, HaruSchema>;

/** An open connection to the state store. */
export interface HaruDatabase {
  db: HaruDb;
  kind: 'postgres' | 'pglite';
  /** Subscribes to a NOTIFY channel; resolves once listening. The returned function unsubscribes. */
  listen(channel: string, onPayload: (payload: string) => void): Promise<() => Promise<void>>;
  /** Resolves when the database answers a trivial query; rejects otherwise. */
  ping(): Promise<void>;
  /** Closes every connection (and releases the embedded data directory). Idempotent. */
  close(): Promise<void>;
}

export interface CreateDatabaseOptions {
  /** `postgres://…`: use that server through postgres.js. Unset: embedded PGlite under `dataDir`. */
  databaseUrl?: string;
  /** Data directory of the embedded database (required when `databaseUrl` is unset). */
  dataDir?: string;
  /** Pool size for postgres.js (default 10). */
  max?: number;
  /**
   * A separate URL for the LISTEN session (`HARU_LISTEN_DATABASE_URL`): the direct endpoint when
   * `databaseUrl` goes through a transaction-mode pooler. Default: `databaseUrl`.
   */
  listenUrl?: string;
  /**
   * libpq's PGSSLROOTCERT/PGSSLCERT/PGSSLKEY from the process's parsed environment, for URLs whose sslmode
   * verifies (default: none, the URL's own parameters only).
   */
  tlsEnv?: PostgresTlsEnv;
}

/**
 * Opens the state store: postgres.js when `databaseUrl` is set, embedded PGlite persisted under `dataDir`
 * otherwise. PGlite serves one process only, so its data directory is locked; a second process gets
 * EmbeddedDatabaseLockedError telling it to set DATABASE_URL. Does not run migrations (see migrate.ts).
 */
export async function createDatabase(opts: CreateDatabaseOptions): Promise<HaruDatabase> {
  if (opts.databaseUrl) return createPostgresDatabase(opts.databaseUrl, opts.max ?? 10, opts);
  if (!opts.dataDir) throw new Error('createDatabase: either databaseUrl or dataDir is required');
  return createPgliteDatabase(opts.dataDir);
}

/**
 * A postgres.js client with Haru's defaults: notices (e.g. "already exists, skipping") are not errors, and
 * the URL's libpq TLS parameters are honoured (`postgresConnectTarget`).
 */
const connectTarget = (target: PostgresConnectTarget, max: number) =>
  postgres(target.url, { max, ssl: target.ssl, onnotice: () => {} });

const tlsTargets = new WeakMap<HaruDatabase, PostgresConnectTarget>();

/**
 * One more session to the server a postgres-kind `database` was opened on, with its URL and TLS settings (a
 * migration lock's own connection); undefined for the embedded database.
 */
export function sideConnection(database: HaruDatabase, max: number): postgres.Sql | undefined {
  const target = tlsTargets.get(database);
  return target && connectTarget(target, max);
}

/**
 * `err` from a query on `database`, as a ConfigError naming the TLS setting to fix when the server's
 * certificate is what failed (`explainPostgresTlsError`); otherwise `err` itself.
 */
export function explainStoreError(database: HaruDatabase, err: unknown): unknown {
  const target = tlsTargets.get(database);
  return target ? explainPostgresTlsError(err, target) : err;
}

function createPostgresDatabase(url: string, max: number, opts: CreateDatabaseOptions): HaruDatabase {
  const tlsEnv = opts.tlsEnv ?? {};
  const target = postgresConnectTarget(url, 'DATABASE_URL', tlsEnv);
  const sql = connectTarget(target, max);
  // LISTEN needs a session of its own; through a transaction pooler it must go to the direct endpoint.
  const listenTarget =
    opts.listenUrl && opts.listenUrl !== url
      ? postgresConnectTarget(opts.listenUrl, 'HARU_LISTEN_DATABASE_URL', tlsEnv)
      : target;
  const listener = listenTarget === target ? sql : connectTarget(listenTarget, 1);
  let closed: Promise<void> | undefined;
  const database: HaruDatabase = {
    db: drizzlePostgres(sql, { schema }) as unknown as HaruDb,
    kind: 'postgres',
    async listen(channel, onPayload) {
      try {
        const { unlisten } = await listener.listen(channel, onPayload);
        return unlisten;
      } catch (err) {
        throw explainPostgresTlsError(err, listenTarget);
      }
    },
    async ping() {
      await sql`select 1`.catch((err: unknown) => {
        throw explainPostgresTlsError(err, target);
      });
    },
    close() {
      closed ??= Promise.all([
        sql.end({ timeout: 5 }),
        listener === sql ? undefined : listener.end({ timeout: 5 }),
      ]).then(() => undefined);
      return closed;
    },
  };
  tlsTargets.set(database, target);
  return database;
}

async function createPgliteDatabase(dataDir: string): Promise<HaruDatabase> {
  const release = lockDataDir(dataDir);
  let client: PGlite;
  try {
    client = await PGlite.create(dataDir);
  } catch (err) {
    release();
    throw err;
  }
  let closed: Promise<void> | undefined;
  return {
    db: drizzlePglite(client, { schema }) as unknown as HaruDb,
    kind: 'pglite',
    listen: (channel, onPayload) => client.listen(channel, onPayload),
    async ping() {
      await client.query('select 1');
    },
    close() {
      closed ??= client.close().finally(release);
      return closed;
    },
  };
}
