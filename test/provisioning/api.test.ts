/**
 * The provision/teardown routes over HTTP: a real API on 127.0.0.1:0, a real Postgres database, and the
 * run's Temporal dev server, where the started workflows are looked at (no worker polls their queue, so
 * they wait there to be inspected, then are terminated).
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { Client, Connection } from '@temporalio/client';
import { type ApiApp, createApp } from '../../api/app';
import { defaultApiConfig } from '../../api/config';
import { silentLogger } from '../../lib/logger';
import { createTemporalOrchestrator } from '../../api/orchestrator';
import { createTemporalProvisioningStarter, type ProvisioningStarter } from '../../api/routes/provisioning';
import { createTestDatabase, seedLayout, type TestDatabase } from '../../db/testing';
import type { FleetLayoutInput } from '../../schemas/layout';
import { provisionWorkflowId, teardownWorkflowId } from '../../workflows/definitions';
import { uniqueTaskQueue } from '../workflows/support/temporal';

const TOKEN = 'api-token-prov';

interface Api {
  url: string;
  app: ApiApp;
  server: http.Server;
}

let db: TestDatabase;
let connection: Connection;
let client: Client;
let taskQueue: string;
let api: Api;
let bare: Api;
const ids: Record<string, string> = {};
const fleetSlug = `prov-api-${process.pid}`;
const started: string[] = [];

const layout: FleetLayoutInput = {
  fleet: { slug: fleetSlug, activeDomain: 'east', policy: { autoFailover: false } },
  domains: ['east', 'west', 'serve', 'fixed', 'bare', 'gone'].map((slug) => ({
    slug,
    provider: slug === 'serve' ? 'skyserve' : slug === 'fixed' ? 'static' : 'skypilot',
    supervisorUrl: 'http://127.0.0.1:9',
    ...(slug === 'bare' ? {} : { launch: { run: 'haru supervisor' } }),
    slots: [{ kind: 'inference', gpuIndex: 0, models: [{ name: 'm', servingUrl: `http://127.0.0.1:9/${slug}/v1` }] }],
  })),
};

async function startApi(provisioning: ProvisioningStarter | undefined): Promise<Api> {
  const config = defaultApiConfig({
    HARU_API_TOKEN: TOKEN,
    HARU_TASK_QUEUE: taskQueue,
    HARU_TEMPORAL_TIMEOUT_MS: 5_000,
  });
  const orchestrator = createTemporalOrchestrator({ client, connection, taskQueue, timeoutMs: 5_000 });
  const app = createApp({
    store: db.store,
    database: db.database,
    orchestrator,
    config,
    logger: silentLogger,
    provisioning,
  });
  await app.start();
  const server = http.createServer(app.handle);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, app, server };
}

async function stopApi(a: Api | undefined) {
  if (!a) return;
  a.server.closeAllConnections();
  await new Promise<void>((resolve) => a.server.close(() => resolve()));
  await a.app.close();
}

beforeAll(async () => {
  db = await createTestDatabase();
  const report = await seedLayout(db.store, layout);
  for (const d of (await db.store.fleets.snapshot(report.fleetId))!.domains) ids[d.slug] = d.id;
  const address = process.env.TEMPORAL_TEST_ADDRESS;
  if (!address) throw new Error('TEMPORAL_TEST_ADDRESS is not set: run the tests through jest');
  connection = await Connection.connect({ address });
  client = new Client({ connection });
  taskQueue = uniqueTaskQueue('provisioning-api');
  api = await startApi(createTemporalProvisioningStarter({ client, connection, taskQueue, timeoutMs: 5_000 }));
  bare = await startApi(undefined);
});

afterAll(async () => {
  for (const id of started)
    await client.workflow
      .getHandle(id)
      .terminate('test done')
      .catch(() => undefined);
  await stopApi(api);
  await stopApi(bare);
  await connection?.close();
  await db?.drop();
});

async function post(base: Api, path: string, body?: unknown) {
  const res = await fetch(`${base.url}${path}`, {
    method: 'POST',
    headers: {
      authorization: `Bearer ${TOKEN}`,
      ...(body === undefined ? {} : { 'content-type': 'application/json' }),
    },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  // eslint-disable-next-line @typescript-eslint/no-explicit-any
  return { status: res.status, body: (await res.json()) as any };
}

const domainPath = (domain: string, action: 'provision' | 'teardown') =>
  `/v1/fleets/${fleetSlug}/domains/${domain}/${action}`;

describe('POST /v1/fleets/:fleet/domains/:domain/provision', () => {
  it('starts provisionDomainWorkflow under haru/<domainId>/provision and answers 202 with its id; asking again joins it', async () => {
    const first = await post(api, domainPath('west', 'provision'));
    expect(first.status).toBe(202);
    expect(first.body).toEqual({
      status: 'accepted',
      kind: 'provision',
      domainId: ids.west,
      workflowId: provisionWorkflowId(ids.west!),
    });
    started.push(first.body.workflowId);
    const description = await client.workflow.getHandle(first.body.workflowId).describe();
    expect(description.type).toBe('provisionDomainWorkflow');
    expect(description.status.name).toBe('RUNNING');
    expect(description.taskQueue).toBe(taskQueue);
    // HARU_API_TOKEN is the key `default`: the requester is recorded by the key's name.
    expect(await description.memo).toMatchObject({ requestedBy: 'api:default' });

    const again = await post(api, domainPath(ids.west!, 'provision'), { reason: 'again' });
    expect(again.status).toBe(202);
    expect(again.body).toMatchObject({ status: 'already_running', workflowId: first.body.workflowId });
  });

  it('refuses what Haru does not provision: a static domain, one without a launch spec, one already ready', async () => {
    expect(await post(api, domainPath('fixed', 'provision'))).toMatchObject({
      status: 422,
      body: { error: { code: 'invalid_target', message: expect.stringMatching(/static/) } },
    });
    expect((await post(api, domainPath('bare', 'provision'))).body.error.message).toMatch(/no launch spec/);
    await db.store.domains.transition(ids.gone!, 'ready');
    expect((await post(api, domainPath('gone', 'provision'))).body.error).toEqual({
      code: 'invalid_target',
      message: 'domain gone is ready: tear it down before provisioning it again',
    });
  });

  it('answers 404 for an unknown fleet or domain and 400 for an unknown body key', async () => {
    expect((await post(api, domainPath('nowhere', 'provision'))).body.error.code).toBe('domain_not_found');
    expect((await post(api, `/v1/fleets/no-fleet/domains/west/provision`)).body.error.code).toBe('fleet_not_found');
    const bad = await post(api, domainPath('west', 'provision'), { force: true });
    expect(bad.status).toBe(400);
    expect(bad.body.error.code).toBe('invalid_request');
  });

  it('answers 503 when the API has no provisioning starter', async () => {
    const res = await post(bare, domainPath('serve', 'provision'));
    expect(res.status).toBe(503);
    expect(res.body.error.code).toBe('orchestrator_unavailable');
  });
});

describe('POST /v1/fleets/:fleet/domains/:domain/teardown', () => {
  it('starts teardownDomainWorkflow with the mode and answers 202 with its id', async () => {
    const res = await post(api, domainPath('serve', 'teardown'), { mode: 'down' });
    expect(res.status).toBe(202);
    expect(res.body).toEqual({
      status: 'accepted',
      kind: 'teardown',
      domainId: ids.serve,
      workflowId: teardownWorkflowId(ids.serve!),
    });
    started.push(res.body.workflowId);
    const handle = client.workflow.getHandle(res.body.workflowId);
    expect((await handle.describe()).type).toBe('teardownDomainWorkflow');
    const history = await handle.fetchHistory();
    const input = history.events?.[0]?.workflowExecutionStartedEventAttributes?.input?.payloads?.[0]?.data;
    expect(JSON.parse(Buffer.from(input!).toString('utf8'))).toEqual({ domainId: ids.serve, mode: 'down' });
  });

  it('refuses the active domain (422) and stopping a SkyServe service', async () => {
    const active = await post(api, domainPath('east', 'teardown'));
    expect(active.status).toBe(422);
    expect(active.body.error.message).toMatch(/east is the active domain/);
    const stop = await post(api, domainPath('serve', 'teardown'), { mode: 'stop' });
    expect(stop.status).toBe(422);
    expect(stop.body.error.message).toMatch(/taken down, not stopped/);
    const mode = await post(api, domainPath('west', 'teardown'), { mode: 'halt' });
    expect(mode.status).toBe(400);
  });

  it('answers 200 already_stopped for a stopped domain and starts nothing', async () => {
    await db.store.domains.transition(ids.bare!, 'stopping');
    await db.store.domains.transition(ids.bare!, 'stopped');
    const res = await post(api, domainPath('bare', 'teardown'));
    expect(res).toEqual({
      status: 200,
      body: { status: 'already_stopped', kind: 'teardown', domainId: ids.bare, workflowId: null },
    });
    await expect(client.workflow.getHandle(teardownWorkflowId(ids.bare!)).describe()).rejects.toThrow();
  });
});
