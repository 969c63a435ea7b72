import type { ServerResponse } from 'node:http';
import { bearerAuth } from '../../lib/bearer-auth';
import { silentLogger } from '../../lib/logger';
import type { DomainSnapshot, FleetSnapshot } from '../../schemas/entities';
import { HaruError } from '../../schemas/errors';
import { defaultFleetPolicy } from '../../schemas/policy';
import { eventually } from '../../test/support/eventually';
import { listenLocal, type LocalServer } from '../../test/support/local-server';
import { defaultApiConfig } from '../config';
import { createApiMetrics } from '../metrics';
import { createForwarder } from './forwarder';
import { createMonitorSignals } from './monitor-signals';
import { createBodyBudget } from './body-budget';
import { createHoldQueue } from './hold-queue';
import type { ProxyDeps } from './inference';
import { leanInference } from './lean';
import { createInFlightRegistry } from './in-flight';
import { createRoutingCache } from './routing-cache';
import { createSleepCheck } from './sleep-check';

const TOKEN = 'lean-token';
const MAX_BODY_BYTES = 1024;
const T = '2026-01-01T00:00:00.000Z';
const FLEET_ID = '00000000-0000-4000-8000-000000000001';
const EAST = '00000000-0000-4000-8000-00000000000e';

const east = (servingUrl: string): DomainSnapshot => ({
  id: EAST,
  fleetId: FLEET_ID,
  slug: 'east',
  displayName: 'east',
  provider: 'static',
  placement: {},
  supervisorUrl: 'http://127.0.0.1:9',
  servingBaseUrl: null,
  launch: null,
  state: 'ready',
  stateChangedAt: T,
  lastSeenAt: T,
  consecutiveFailures: 0,
  lastError: null,
  isActive: true,
  slots: [
    {
      id: '00000000-0000-4000-8000-0000000000ea',
      domainId: EAST,
      gpuIndex: 0,
      stateChangedAt: T,
      kind: 'inference',
      state: 'serving',
      sleepLevel: 1,
      models: [{ name: 'm', servingUrl }],
    },
  ],
});

const fleet = (servingUrl: string): FleetSnapshot => ({
  id: FLEET_ID,
  slug: 'f',
  displayName: 'f',
  activeDomainId: EAST,
  routeRevision: 1,
  policy: defaultFleetPolicy(),
  createdAt: T,
  updatedAt: T,
  domains: [east(servingUrl)],
  inFlightOperation: null,
});

let upstream: LocalServer;
let server: LocalServer;
const upstreamPaths: string[] = [];
const forwarder = createForwarder();
const metrics = createApiMetrics();

beforeAll(async () => {
  upstream = await listenLocal((req, res) => {
    upstreamPaths.push(req.url ?? '');
    req.resume();
    req.on('end', () => {
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end('{"answer":"east"}');
    });
  });
  const snapshot = fleet(upstream.url);
  const config = defaultApiConfig();
  const now = () => new Date();
  const cache = createRoutingCache({
    store: {
      fleets: {
        list: async () => [snapshot],
        snapshot: async (ref) => (ref === snapshot.slug || ref === snapshot.id ? snapshot : null),
        routeRevision: async () => snapshot.routeRevision,
      },
    },
    ttlMs: 60_000,
    maxEntries: 10,
    storeTimeoutMs: 1_000,
    now,
  });
  const deps: ProxyDeps = {
    sleepCheck: createSleepCheck({ ttlMs: 60_000, timeoutMs: 1_000 }),
    cache,
    forwarder,
    holdQueue: createHoldQueue(1),
    bodyBudget: createBodyBudget(1024 * 1024),
    inFlight: createInFlightRegistry({ cache, logger: silentLogger }),
    monitorSignals: createMonitorSignals({ checkNow: async () => {}, debounceMs: 1_000, now, logger: silentLogger }),
    metrics,
    logger: silentLogger,
    config,
    now,
  };
  const lean = leanInference({
    deps,
    auth: bearerAuth(TOKEN, (reason) => new HaruError('unauthorized', reason)),
    maxBodyBytes: MAX_BODY_BYTES,
  });
  // What api/app.ts does with a request lean refuses: here a marker instead of Express.
  server = await listenLocal((req, res) => {
    if (!lean(req, res)) passedOn(res);
  });
});
afterAll(async () => {
  await server?.close();
  await upstream?.close();
  await forwarder.close();
});

function passedOn(res: ServerResponse): void {
  res.statusCode = 299;
  res.end('passed on');
}

const post = (path: string, init: { body?: string; headers?: Record<string, string>; method?: string } = {}) =>
  fetch(`${server.url}${path}`, {
    method: init.method ?? 'POST',
    headers: { authorization: `Bearer ${TOKEN}`, 'x-haru-fleet': 'f', ...init.headers },
    body: init.method === 'GET' ? undefined : (init.body ?? '{"model":"m","messages":[]}'),
  });

/** The request counter's value for one label set (0 when it never counted). */
async function counted(labels: { route: string; status: string }): Promise<number> {
  const { values } = await metrics.httpRequests.get();
  return (
    values.find(
      (v) => v.labels.route === labels.route && v.labels.status === labels.status && v.labels.method === 'POST',
    )?.value ?? 0
  );
}

describe('leanInference', () => {
  it.each([
    ['/v1/chat/completions', 'chat/completions'],
    ['/v1/completions', 'completions'],
    ['/v1/embeddings', 'embeddings'],
  ])('proxies POST %s to the upstream endpoint %s', async (path, endpoint) => {
    const res = await post(`${path}?trace=1`);
    expect(res.status).toBe(200);
    expect(await res.json()).toEqual({ answer: 'east' });
    expect(res.headers.get('x-haru-domain')).toBe('east');
    expect(upstreamPaths.at(-1)).toBe(`/v1/${endpoint}`);
  });

  it.each([
    ['GET', '/v1/chat/completions'],
    ['POST', '/v1/chat/completions/'],
    ['POST', '/V1/chat/completions'],
    ['POST', '/v1/models'],
    ['POST', '/v1/fleets'],
  ])('leaves %s %s untouched for the Express routes', async (method, path) => {
    const res = await post(path, { method });
    expect([res.status, await res.text()]).toEqual([299, 'passed on']);
  });

  it('refuses a request without the token with the 401 envelope and a Bearer challenge, counted as unmatched', async () => {
    const before = await counted({ route: 'unmatched', status: '401' });
    const res = await post('/v1/chat/completions', { headers: { authorization: '' } });
    expect(res.status).toBe(401);
    expect(res.headers.get('www-authenticate')).toBe('Bearer');
    expect(res.headers.get('content-type')).toBe('application/json; charset=utf-8');
    expect(await res.json()).toEqual({ error: { code: 'unauthorized', message: 'missing bearer token' } });
    await eventually(
      'the request counted',
      async () => (await counted({ route: 'unmatched', status: '401' })) > before,
    );
  });

  it('answers 413 in the envelope for a body over the cap', async () => {
    const res = await post('/v1/chat/completions', { body: `{"model":"m","pad":"${'x'.repeat(MAX_BODY_BYTES)}"}` });
    expect(res.status).toBe(413);
    expect(((await res.json()) as { error: { code: string } }).error.code).toBe('payload_too_large');
  });

  it('answers the envelope for a request the proxy refuses (no fleet named)', async () => {
    const res = await post('/v1/embeddings', { headers: { 'x-haru-fleet': '' } });
    expect(res.status).toBe(400);
    expect(((await res.json()) as { error: { code: string } }).error.code).toBe('invalid_request');
  });

  it('counts a served request under its path', async () => {
    const before = await counted({ route: '/v1/completions', status: '200' });
    expect((await post('/v1/completions')).status).toBe(200);
    await eventually(
      'the request counted',
      async () => (await counted({ route: '/v1/completions', status: '200' })) > before,
    );
  });
});
