/**
 * Throwaway databases for tests. A template database is migrated once per migration set (its name carries
 * a hash of db/migrations), then every test file clones it with `CREATE DATABASE … TEMPLATE`, which takes
 * tens of milliseconds. Test infrastructure: it reads HARU_TEST_DATABASE_URL itself.
 */
import { createHash, randomBytes } from 'node:crypto';
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import postgres from 'postgres';
import type { FleetLayoutInput } from '../schemas/layout';
import { createDatabase, type HaruDatabase } from './client';
import { applyLayout, type LayoutApplyReport } from './layout-apply';
import { migrate, MIGRATIONS_FOLDER } from './migrate';
import { createStore, type Store } from './store';

export const DEFAULT_TEST_DATABASE_URL = 'postgres://postgres@127.0.0.1:5432/postgres';
const TEMPLATE_PREFIX = 'haru_tpl_';
const TEST_DB_PREFIX = 'haru_test_';
const TEMPLATE_LOCK_KEY = 0x68617274; // serialises template builders across jest workers and runs
const STALE_TEST_DB_SECONDS = 6 * 3600;

/** The server tests use: HARU_TEST_DATABASE_URL, else the local default. */
export const testAdminUrl = (): string => process.env.HARU_TEST_DATABASE_URL?.trim() || DEFAULT_TEST_DATABASE_URL;

/** `adminUrl` with its database name replaced. */
export function databaseUrl(adminUrl: string, name: string): string {
  const url = new URL(adminUrl);
  url.pathname = `/${name}`;
  return url.toString();
}

/** The template's name: changes whenever a migration file does, so a stale template is never cloned. */
export function templateDatabaseName(): string {
  const hash = createHash('sha256');
  for (const file of readdirSync(MIGRATIONS_FOLDER, { recursive: true }).map(String).sort()) {
    if (!file.endsWith('.sql') && !file.endsWith('.json')) continue;
    hash.update(file).update(readFileSync(path.join(MIGRATIONS_FOLDER, file)));
  }
  return `${TEMPLATE_PREFIX}${hash.digest('hex').slice(0, 16)}`;
}

const connectAdmin = (adminUrl: string) => postgres(adminUrl, { max: 1, onnotice: () => {}, connect_timeout: 10 });

/**
 * Creates and migrates the template database `name` unless it exists. Safe to call from several
 * processes at once (advisory lock); cheap when the template is already there. Returns its name.
 */
export async function prepareTemplateDatabase(
  adminUrl = testAdminUrl(),
  name = templateDatabaseName(),
): Promise<string> {
  const admin = connectAdmin(adminUrl);
  try {
    // max: 1 keeps the session-level advisory lock and every statement on one connection.
    await admin`select pg_advisory_lock(${TEMPLATE_LOCK_KEY})`;
    const [exists] = await admin`select 1 from pg_database where datname = ${name}`;
    if (!exists) {
      // Built under another name and renamed when complete: a crashed build never looks ready.
      const building = `${name}_build`;
      await admin.unsafe(`drop database if exists "${building}" with (force)`);
      await admin.unsafe(`create database "${building}"`);
      const database = await createDatabase({ databaseUrl: databaseUrl(adminUrl, building), max: 1 });
      try {
        await migrate(database);
      } finally {
        await database.close();
      }
      await admin.unsafe(`alter database "${building}" rename to "${name}"`);
    }
    await admin`select pg_advisory_unlock(${TEMPLATE_LOCK_KEY})`;
    return name;
  } catch (err) {
    throw new Error(
      `cannot prepare the test database template on ${redact(adminUrl)}: ${(err as Error).message}. ` +
        'Tests need PostgreSQL: start it or set HARU_TEST_DATABASE_URL.',
      { cause: err },
    );
  } finally {
    await admin.end({ timeout: 5 });
  }
}

/**
 * Drops test databases left by crashed runs (older than six hours) and templates of other migration
 * sets. Databases in use are skipped.
 */
export async function dropStaleTestDatabases(adminUrl = testAdminUrl()): Promise<void> {
  const admin = connectAdmin(adminUrl);
  try {
    const current = templateDatabaseName();
    const cutoff = Math.floor(Date.now() / 1000) - STALE_TEST_DB_SECONDS;
    const rows = await admin<{ datname: string }[]>`
      select datname from pg_database where datname like ${`${TEST_DB_PREFIX}%`} or datname like ${`${TEMPLATE_PREFIX}%`}`;
    for (const { datname } of rows) {
      const created = Number(/^haru_test_(\d+)_/.exec(datname)?.[1] ?? Number.NaN);
      const stale = datname.startsWith(TEMPLATE_PREFIX) ? !datname.startsWith(current) : created < cutoff;
      if (!stale) continue;
      await admin.unsafe(`drop database if exists "${datname}"`).catch(() => undefined);
    }
  } finally {
    await admin.end({ timeout: 5 });
  }
}

export interface TestDatabase {
  /** Connection URL of the new database (for child processes: `DATABASE_URL`). */
  url: string;
  database: HaruDatabase;
  store: Store;
  /** Closes the connections and drops the database. */
  drop(): Promise<void>;
}

/**
 * A fresh, migrated Postgres database cloned from the template (created on first use when globalSetup
 * did not). `max` sizes the pool (default 5); `now` is the store's clock; `migrated: false` gives an
 * empty database instead (to test migrating one).
 */
export async function createTestDatabase(
  opts: { max?: number; now?: () => Date; migrated?: boolean } = {},
): Promise<TestDatabase> {
  const adminUrl = testAdminUrl();
  const template = opts.migrated === false ? 'template0' : await prepareTemplateDatabase(adminUrl);
  const name = `${TEST_DB_PREFIX}${Math.floor(Date.now() / 1000)}_${randomBytes(5).toString('hex')}`;
  const admin = connectAdmin(adminUrl);
  try {
    await admin.unsafe(`create database "${name}" template "${template}"`);
  } finally {
    await admin.end({ timeout: 5 });
  }
  const url = databaseUrl(adminUrl, name);
  const database = await createDatabase({ databaseUrl: url, max: opts.max ?? 5 });
  return {
    url,
    database,
    store: createStore(database, opts.now),
    async drop() {
      await database.close();
      const dropper = connectAdmin(adminUrl);
      try {
        await dropper.unsafe(`drop database if exists "${name}" with (force)`);
      } finally {
        await dropper.end({ timeout: 5 });
      }
    },
  };
}

/** A fresh, migrated embedded (PGlite) database in a temporary directory. Starting one takes seconds. */
export async function createPgliteTestDatabase(
  opts: { now?: () => Date } = {},
): Promise<Omit<TestDatabase, 'url'> & { dataDir: string }> {
  const dataDir = mkdtempSync(path.join(os.tmpdir(), 'haru-pglite-'));
  const database = await createDatabase({ dataDir });
  await migrate(database);
  return {
    dataDir,
    database,
    store: createStore(database, opts.now),
    async drop() {
      await database.close();
      rmSync(dataDir, { recursive: true, force: true });
    },
  };
}

/** Applies a layout as a fixture (see applyLayout); throws on an invalid layout. */
export const seedLayout = (
  target: Store | HaruDatabase,
  layout: FleetLayoutInput,
  opts: { prune?: boolean } = {},
): Promise<LayoutApplyReport> => applyLayout(target, layout, opts);

function redact(url: string): string {
  try {
    const u = new URL(url);
    if (u.password) u.password = '***';
    return u.toString();
  } catch {
    return '(invalid url)';
  }
}
