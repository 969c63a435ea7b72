import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { Client, Connection } from '@temporalio/client';
import postgres from 'postgres';
import { type ApiApp, createApp } from '../../api/app';
import { defaultApiConfig } from '../../api/config';
import { createTemporalOrchestrator } from '../../api/orchestrator';
import { createDatabase, type HaruDatabase } from '../../db/client';
import { createStore } from '../../db/store';
import { createTestDatabase, seedLayout, testAdminUrl, type TestDatabase } from '../../db/testing';
import { createJsonLogger } from '../../lib/logger';
import { freePort } from '../support/ports';
import { call, twoDomainLayout } from './support/harness';

/** Postgres itself refusing (not a socket error): the control API answers 503 with the code logged. */
describe('a state store that refuses to serve', () => {
  let db: TestDatabase;
  let name: string;
  let fleetSlug: string;
  const admin = () => postgres(testAdminUrl(), { max: 1, onnotice: () => {} });

  beforeAll(async () => {
    db = await createTestDatabase({ max: 1 });
    name = new URL(db.url).pathname.slice(1);
    fleetSlug = (
      await seedLayout(db.store, twoDomainLayout({ eastUrl: 'http://127.0.0.1:9', westUrl: 'http://127.0.0.1:9' }))
    ).fleetSlug;
  });
  afterAll(async () => {
    const sql = admin();
    await sql.unsafe(`alter database "${name}" allow_connections true`);
    await sql.unsafe(`alter database "${name}" reset default_transaction_read_only`);
    await sql.end();
    await db?.drop();
  });

  /** An API on a fresh connection pool (opened after the database changed), with its log lines kept. */
  async function startApi(): Promise<{ url: string; logs: Record<string, unknown>[]; close(): Promise<void> }> {
    const logs: Record<string, unknown>[] = [];
    const logger = createJsonLogger({ level: 'warn', write: (line) => logs.push(JSON.parse(line)) });
    const database: HaruDatabase = await createDatabase({ databaseUrl: db.url, max: 1 });
    const connection = Connection.lazy({ address: `127.0.0.1:${await freePort()}`, connectTimeout: 500 });
    const config = defaultApiConfig({ HARU_STORE_TIMEOUT_MS: 5_000 });
    const orchestrator = createTemporalOrchestrator({
      client: new Client({ connection, namespace: 'default' }),
      connection,
      taskQueue: 'store-refusal',
      timeoutMs: 500,
    });
    const api: ApiApp = createApp({ store: createStore(database), database, orchestrator, config, logger });
    const server = http.createServer(api.handle);
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    return {
      url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
      logs,
      async close() {
        server.closeAllConnections();
        await new Promise<void>((resolve) => server.close(() => resolve()));
        await api.close();
        await connection.close();
        await database.close();
      },
    };
  }

  it('answers 503 state_store_unavailable and logs SQLSTATE 55000 when the database refuses connections', async () => {
    const sql = admin();
    await sql.unsafe(`alter database "${name}" allow_connections false`);
    await sql.end();
    const api = await startApi();
    try {
      const res = await call(`${api.url}/v1/fleets/${fleetSlug}`);
      expect(res.status).toBe(503);
      expect(res.body.error).toEqual({ code: 'state_store_unavailable', message: expect.stringContaining('55000') });
      expect(api.logs).toContainEqual(expect.objectContaining({ msg: 'state store unavailable', code: '55000' }));
      // /readyz is open to anyone: it says what is down; the driver's text (it names the database) goes to the log.
      const ready = await call(`${api.url}/readyz`);
      expect(ready.status).toBe(503);
      expect(ready.body.error).toEqual({
        code: 'state_store_unavailable',
        message: 'Postgres is unreachable; Temporal is unreachable too',
      });
      expect(api.logs).toContainEqual(
        expect.objectContaining({ msg: 'readiness: Postgres is unreachable', error: expect.stringContaining(name) }),
      );
    } finally {
      await api.close();
      const undo = admin();
      await undo.unsafe(`alter database "${name}" allow_connections true`);
      await undo.end();
    }
  });

  it('answers 503 and logs SQLSTATE 25006 when a write meets a read-only database (a managed failover)', async () => {
    const sql = admin();
    await sql.unsafe(`alter database "${name}" set default_transaction_read_only = on`);
    await sql.end();
    const api = await startApi();
    try {
      expect((await call(`${api.url}/v1/fleets/${fleetSlug}`)).status).toBe(200);
      const res = await call(`${api.url}/v1/fleets/${fleetSlug}/pause`, { body: { reason: 'test' } });
      expect(res.status).toBe(503);
      expect(res.body.error.code).toBe('state_store_unavailable');
      expect(api.logs).toContainEqual(expect.objectContaining({ msg: 'state store unavailable', code: '25006' }));
    } finally {
      await api.close();
      const undo = admin();
      await undo.unsafe(`alter database "${name}" reset default_transaction_read_only`);
      await undo.end();
    }
  });
});
