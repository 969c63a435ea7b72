import type { AddressInfo } from 'node:net';
import { eventually } from '../test/support/eventually';
import { errorBodySchema } from '../schemas/errors';
import { healthzResponseSchema, readyzResponseSchema } from '../schemas/api-responses';
import { createWorkerMetrics } from './metrics';
import { createWorkerHttpServer, READY_CHECK_MS, workerProbe, type WorkerHttpDeps } from './http-server';

/** A worker's probe dependencies: running, both stores answering, unless a test says otherwise. */
function deps(over: Partial<WorkerHttpDeps> = {}) {
  const warned: { message: string; fields: Record<string, unknown> }[] = [];
  const d: WorkerHttpDeps = {
    metrics: createWorkerMetrics(),
    workerState: () => 'RUNNING',
    pingDatabase: async () => undefined,
    pingTemporal: async () => undefined,
    warn: (message, fields) => warned.push({ message, fields }),
    ...over,
  };
  return { d, warned };
}

const refused = () => Promise.reject(new Error('connect ECONNREFUSED 10.1.2.3:5432 user=haru_prod'));

describe('the worker’s HTTP listener', () => {
  let close: (() => Promise<void>) | undefined;
  afterEach(async () => {
    await close?.();
    close = undefined;
  });

  async function serve(d: WorkerHttpDeps) {
    const server = createWorkerHttpServer(d);
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    close = () => new Promise<void>((resolve) => server.close(() => resolve()));
    const base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    return async (path: string, method = 'GET') => {
      const res = await fetch(`${base}${path}`, { method });
      const text = await res.text();
      return { status: res.status, text, type: res.headers.get('content-type') };
    };
  }

  it('is alive and ready while the worker runs and Postgres and Temporal answer, and serves its metrics', async () => {
    const get = await serve(deps().d);
    const live = await get('/healthz');
    expect(live.status).toBe(200);
    expect(healthzResponseSchema.parse(JSON.parse(live.text))).toEqual({ status: 'ok' });
    const ready = await get('/readyz');
    expect(ready.status).toBe(200);
    expect(readyzResponseSchema.parse(JSON.parse(ready.text))).toEqual({
      status: 'ready',
      checks: { postgres: 'ok', temporal: 'ok' },
    });
    const metrics = await get('/metrics');
    expect(metrics.status).toBe(200);
    expect(metrics.text).toMatch(/^# HELP haru_/m);
  });

  it('stays alive through a Postgres outage (a restart heals nothing) but is not ready, without the driver’s text', async () => {
    const { d, warned } = deps({ pingDatabase: refused });
    const get = await serve(d);
    expect((await get('/healthz')).status).toBe(200);
    const ready = await get('/readyz');
    expect(ready.status).toBe(503);
    expect(errorBodySchema.parse(JSON.parse(ready.text))).toEqual({
      error: { code: 'state_store_unavailable', message: 'Postgres is unreachable' },
    });
    expect(ready.text).not.toContain('haru_prod');
    expect(warned).toEqual([
      { message: 'readiness: Postgres is unreachable', fields: { error: expect.stringContaining('haru_prod') } },
    ]);
  });

  it('is not ready when Temporal does not answer, and says both when neither does', async () => {
    const get = await serve(deps({ pingTemporal: refused }).d);
    expect(JSON.parse((await get('/readyz')).text)).toEqual({
      error: { code: 'orchestrator_unavailable', message: 'Temporal is unreachable' },
    });
    await close?.();
    const both = await serve(deps({ pingTemporal: refused, pingDatabase: refused }).d);
    expect(JSON.parse((await both('/readyz')).text)).toEqual({
      error: { code: 'state_store_unavailable', message: 'Postgres is unreachable; Temporal is unreachable too' },
    });
  });

  it('fails both probes once the Temporal worker no longer polls (draining at shutdown, stopped)', async () => {
    let state = 'RUNNING';
    const get = await serve(deps({ workerState: () => state }).d);
    expect((await get('/healthz')).status).toBe(200);
    state = 'DRAINING';
    for (const path of ['/healthz', '/readyz']) {
      const answer = await get(path);
      expect(answer.status).toBe(503);
      expect(JSON.parse(answer.text)).toEqual({
        error: { code: 'worker_not_running', message: 'the Temporal worker is DRAINING' },
      });
    }
  });

  it('answers any other route or method with not_found in the error shape', async () => {
    const get = await serve(deps().d);
    for (const [path, method] of [
      ['/', 'GET'],
      ['/metrics', 'POST'],
      ['/readyz/x', 'GET'],
    ] as const) {
      const answer = await get(path, method);
      expect(answer.status).toBe(404);
      expect(errorBodySchema.parse(JSON.parse(answer.text)).error.code).toBe('not_found');
    }
  });
});

describe('workerProbe', () => {
  afterEach(() => jest.useRealTimers());

  it('is not ready when a dependency hangs past its check, rather than hanging the probe', async () => {
    jest.useFakeTimers();
    const hung = new Promise<void>(() => undefined);
    const { d, warned } = deps({ pingTemporal: () => hung });
    const probe = workerProbe('/readyz', d);
    const settled = expect(probe).rejects.toMatchObject({ code: 'orchestrator_unavailable' });
    await jest.advanceTimersByTimeAsync(READY_CHECK_MS);
    await settled;
    expect(warned[0]?.fields).toEqual({ error: `no answer in ${READY_CHECK_MS} ms` });
  });
});

describe('the readiness check', () => {
  it('runs once for requests that ask at the same time', async () => {
    let pings = 0;
    let answer: () => void = () => undefined;
    const gate = new Promise<void>((resolve) => (answer = resolve));
    const server = createWorkerHttpServer(
      deps({
        pingDatabase: async () => {
          pings += 1;
          await gate;
        },
      }).d,
    );
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    try {
      const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/readyz`;
      let arrived = 0;
      server.on('request', () => (arrived += 1));
      const asked = Array.from({ length: 5 }, () => fetch(url));
      await eventually('all five requests at the listener', () => arrived === 5);
      answer();
      expect((await Promise.all(asked)).map((r) => r.status)).toEqual([200, 200, 200, 200, 200]);
      expect(pings).toBe(1);
      expect((await fetch(url)).status).toBe(200);
      expect(pings).toBe(2); // a later request checks again
    } finally {
      await new Promise<void>((resolve) => server.close(() => resolve()));
    }
  });
});
