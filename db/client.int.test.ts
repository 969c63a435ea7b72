import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { sql } from 'drizzle-orm';
import { createDatabase } from './client';
import { testLayout } from './fixtures';
import { applyLayout } from './layout-apply';
import { migrate, MIGRATIONS_FOLDER } from './migrate';
import { EmbeddedDatabaseLockedError } from './pglite-lock';
import { createStore } from './store';
import { createTestDatabase, type TestDatabase } from './testing';

describe('embedded database (PGlite)', () => {
  let dataDir: string;
  beforeAll(() => {
    dataDir = mkdtempSync(path.join(os.tmpdir(), 'haru-pgdata-'));
  });
  afterAll(() => rmSync(dataDir, { recursive: true, force: true }));

  it('persists under its data directory, which one holder at a time may open', async () => {
    const first = await createDatabase({ dataDir });
    try {
      expect(first.kind).toBe('pglite');
      await migrate(first);
      await applyLayout(first, testLayout({ fleet: 'persisted' }));
      await expect(createDatabase({ dataDir })).rejects.toThrow(EmbeddedDatabaseLockedError);
      await expect(createDatabase({ dataDir })).rejects.toThrow(/set DATABASE_URL/);
    } finally {
      await first.close();
    }
    // Reopened after close: the fleet is still there and migrations are already applied.
    const second = await createDatabase({ dataDir });
    try {
      await migrate(second);
      expect((await createStore(second).fleets.snapshot('persisted'))?.domains).toHaveLength(2);
    } finally {
      await second.close();
    }
  }, 60_000);
});

describe('server database (postgres.js)', () => {
  let t: TestDatabase;
  beforeAll(async () => {
    t = await createTestDatabase();
  });
  afterAll(() => t?.drop());

  it('answers ping and tolerates concurrent re-runs of the migrations', async () => {
    expect(t.database.kind).toBe('postgres');
    await t.database.ping();
    const others = await Promise.all([1, 2, 3].map(() => createDatabase({ databaseUrl: t.url, max: 1 })));
    try {
      await Promise.all([migrate(t.database), ...others.map(migrate)]);
    } finally {
      await Promise.all(others.map((d) => d.close()));
    }
    const result = await t.database.db.execute(sql`select count(*)::int as n from drizzle.__drizzle_migrations`);
    const rows = Array.isArray(result) ? result : (result as { rows: unknown[] }).rows;
    const journal = JSON.parse(readFileSync(path.join(MIGRATIONS_FOLDER, 'meta', '_journal.json'), 'utf8'));
    expect(rows).toEqual([{ n: journal.entries.length }]);
  });

  it('rejects ping once closed, and close is idempotent', async () => {
    const extra = await createDatabase({ databaseUrl: t.url, max: 1 });
    await extra.ping();
    await extra.close();
    await extra.close();
    await expect(extra.ping()).rejects.toThrow();
  });
});
