import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { Client, Connection } from '@temporalio/client';
import { createDatabase } from '../../../db/client';
import { createStore, type Store } from '../../../db/store';
import { createTestDatabase, seedLayout, type TestDatabase } from '../../../db/testing';
import { type ApiApp, createApp } from '../../../api/app';
import { type ApiConfig, defaultApiConfig } from '../../../api/config';
import { type Logger, silentLogger } from '../../../lib/logger';
import { createTemporalOrchestrator, type Orchestrator } from '../../../api/orchestrator';
import type { FleetSnapshot } from '../../../schemas/entities';
import type { FleetLayoutInput } from '../../../schemas/layout';

/** Where the test run's Temporal dev server listens (globalSetup). */
export function temporalTestAddress(): string {
  const address = process.env.TEMPORAL_TEST_ADDRESS;
  if (!address)
    throw new Error('TEMPORAL_TEST_ADDRESS is not set: run the tests through jest (globalSetup starts the server)');
  return address;
}

let fleetCounter = 0;
/** A fleet slug unique within the run (test files share one Temporal server). */
export const uniqueSlug = (prefix = 'fleet') => `${prefix}-${process.pid}-${Date.now().toString(36)}-${fleetCounter++}`;

/**
 * A two-domain fleet: `east` active and `west` standby, each serving `models` at its own base URL.
 * Supervisors point at an unused port: the API never calls them.
 */
export function twoDomainLayout(opts: {
  slug?: string;
  eastUrl: string;
  westUrl: string;
  models?: string[];
  autoFailover?: boolean;
  /** Per-model URLs instead of one base URL per domain. */
  eastModelUrls?: Record<string, string>;
  westModelUrls?: Record<string, string>;
}): FleetLayoutInput {
  const models = opts.models ?? ['test-model'];
  const domain = (slug: string, url: string, modelUrls?: Record<string, string>) => ({
    slug,
    supervisorUrl: 'http://127.0.0.1:9',
    slots: [
      {
        kind: 'inference' as const,
        gpuIndex: 0,
        models: models.map((name) => ({ name, servingUrl: modelUrls?.[name] ?? url })),
      },
      { kind: 'training' as const, gpuIndex: 0, command: ['true'], checkpointDir: `/tmp/haru-test/${slug}` },
    ],
  });
  return {
    fleet: {
      slug: opts.slug ?? uniqueSlug(),
      activeDomain: 'east',
      policy: { autoFailover: opts.autoFailover ?? false },
    },
    domains: [domain('east', opts.eastUrl, opts.eastModelUrls), domain('west', opts.westUrl, opts.westModelUrls)],
  };
}

export interface Harness {
  /** http://127.0.0.1:<port> of the API. */
  url: string;
  db: TestDatabase;
  store: Store;
  api: ApiApp;
  config: ApiConfig;
  orchestrator: Orchestrator;
  temporal: { client: Client; connection: Connection };
  server: http.Server;
  /** Snapshot of the seeded fleet (domains ready), by slug. */
  fleet(slug?: string): Promise<FleetSnapshot>;
  /** Seeds one more layout and marks its domains ready; returns its snapshot. */
  seed(layout: FleetLayoutInput): Promise<FleetSnapshot>;
  close(): Promise<void>;
}

/**
 * A real API on 127.0.0.1:0 over a fresh Postgres database and the run's Temporal dev server (or
 * `temporalAddress`, e.g. a dead port to test 503s). Each layout is seeded and its domains made `ready`.
 */
export async function startHarness(opts: {
  layouts?: FleetLayoutInput[];
  config?: Partial<ApiConfig>;
  temporalAddress?: string;
  now?: () => Date;
  /** Connect the API's own database through this local port (a TCP relay to Postgres, for outage tests). */
  viaPort?: number;
  /** The API's logger (silent by default), e.g. to read its access lines. */
  logger?: Logger;
}): Promise<Harness> {
  const config = defaultApiConfig({
    HARU_TASK_QUEUE: `api-test-${process.pid}-${fleetCounter++}`,
    HARU_TEMPORAL_TIMEOUT_MS: 3_000,
    reconcileWaitMs: 0,
    // Generous on a loaded machine: only the outage tests want routing reads to time out.
    HARU_STORE_TIMEOUT_MS: 5_000,
    ...opts.config,
  });
  const db = await createTestDatabase();
  const connection = Connection.lazy({ address: opts.temporalAddress ?? temporalTestAddress(), connectTimeout: 2_000 });
  const client = new Client({ connection, namespace: config.temporal.namespace });
  const orchestrator = createTemporalOrchestrator({
    client,
    connection,
    taskQueue: config.HARU_TASK_QUEUE,
    timeoutMs: config.HARU_TEMPORAL_TIMEOUT_MS,
    queryTimeoutMs: 300,
  });
  let apiDatabase = db.database;
  if (opts.viaPort !== undefined) {
    const relayed = new URL(db.url);
    relayed.port = String(opts.viaPort);
    apiDatabase = await createDatabase({ databaseUrl: relayed.toString(), max: 3 });
  }
  const store = apiDatabase === db.database ? db.store : createStore(apiDatabase);
  const logger = opts.logger ?? silentLogger;
  const api = createApp({ store, database: apiDatabase, orchestrator, config, logger, now: opts.now });
  await api.start();
  const server = http.createServer(api.handle);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  const slugs: string[] = [];

  async function seed(layout: FleetLayoutInput): Promise<FleetSnapshot> {
    const report = await seedLayout(db.store, layout);
    const snapshot = await db.store.fleets.snapshot(report.fleetId);
    for (const d of snapshot!.domains) await db.store.domains.transition(d.id, 'ready');
    slugs.push(report.fleetSlug);
    return (await db.store.fleets.snapshot(report.fleetId))!;
  }
  for (const layout of opts.layouts ?? []) await seed(layout);

  return {
    url,
    db,
    store,
    api,
    config,
    orchestrator,
    temporal: { client, connection },
    server,
    seed,
    async fleet(slug = slugs[0]!) {
      const snapshot = await db.store.fleets.snapshot(slug);
      if (!snapshot) throw new Error(`no fleet ${slug}`);
      return snapshot;
    },
    async close() {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
      await api.close();
      await orchestrator.drain();
      await connection.close();
      if (apiDatabase !== db.database) await apiDatabase.close();
      await db.drop();
    },
  };
}

/** Moves the fleet's routing pointer the way a promotion does: an operation, started, then commitRouting. */
export async function moveRoute(store: Store, fleet: FleetSnapshot, targetSlug: string): Promise<number> {
  const target = fleet.domains.find((d) => d.slug === targetSlug)!;
  const { operation } = await store.operations.create({
    fleetId: fleet.id,
    kind: 'promote',
    targetDomainId: target.id,
    reason: 'test',
    requestedBy: 'test',
  });
  await store.operations.start(operation.id);
  const result = await store.fleets.commitRouting({
    fleetId: fleet.id,
    operationId: operation.id,
    expectedActiveDomainId: fleet.activeDomainId,
    targetDomainId: target.id,
  });
  await store.operations.succeed(operation.id);
  return result.routeRevision;
}

/** A parsed JSON answer; tests read into it freely and assert what they read. */
// eslint-disable-next-line @typescript-eslint/no-explicit-any
export type JsonBody = any;

/** JSON fetch helper: status, headers and parsed body. */
export async function call(
  url: string,
  init: { method?: string; body?: unknown; headers?: Record<string, string>; token?: string } = {},
): Promise<{ status: number; headers: Headers; body: JsonBody }> {
  const res = await fetch(url, {
    method: init.method ?? (init.body === undefined ? 'GET' : 'POST'),
    headers: {
      ...(init.body === undefined ? {} : { 'content-type': 'application/json' }),
      ...(init.token ? { authorization: `Bearer ${init.token}` } : {}),
      ...init.headers,
    },
    body: init.body === undefined ? undefined : typeof init.body === 'string' ? init.body : JSON.stringify(init.body),
  });
  const text = await res.text();
  let body: unknown = text;
  try {
    body = text ? JSON.parse(text) : null;
  } catch {
    // not JSON: keep the text
  }
  return { status: res.status, headers: res.headers, body };
}
