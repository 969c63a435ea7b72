/**
 * Chaos: the state store goes away in the middle of a promotion. A private PostgreSQL server (own data
 * dir and port) backs the worker process and the API; it is stopped while the promotion is inside
 * wakeModels. The worker's activities fail against it and are retried; the API keeps proxying with the
 * routing it last knew (marked stale); once the server is back the promotion completes and traffic moves.
 */
import { standbyReady } from './support/failover';
import { createDatabase, type HaruDatabase } from '../../db/client';
import { migrate } from '../../db/migrate';
import { createStore } from '../../db/store';
import { MODEL } from '../workflows/support/sim-fleet';
import { eventually, uniqueTaskQueue, useTestServer } from '../workflows/support/temporal';
import { type ChaosApi, proxiedCompletion, startChaosApi } from './support/api';
import { type PrivatePostgres, startPrivatePostgres } from './support/private-postgres';
import { type ChaosRig, startChaosRig } from './support/rig';
import { crashWatch } from '../support/worker-process';

jest.setTimeout(300_000);

let pg: PrivatePostgres | undefined;
let database: HaruDatabase | undefined;
let rig: ChaosRig | undefined;
let api: ChaosApi | undefined;
let isStoreDown = false;

const server = useTestServer(async () => {
  // Back up first, so every client below can close cleanly even when the test failed mid-outage.
  if (isStoreDown) await pg?.start();
  await api?.close();
  await rig?.close();
  await database?.close();
  await pg?.destroy();
});

it('retries activities through a PostgreSQL restart mid-promotion while the proxy serves stale routing', async () => {
  pg = await startPrivatePostgres();
  database = await createDatabase({ databaseUrl: pg.url(), max: 5 });
  await migrate(database);
  const temporalAddress = process.env.TEMPORAL_TEST_ADDRESS!;
  const taskQueue = uniqueTaskQueue('chaos-postgres');
  const db = { url: pg.url(), database, store: createStore(database), drop: async () => undefined };
  rig = await startChaosRig({ temporal: server, temporalAddress, taskQueue, db, policy: { wakeTimeoutMs: 180_000 } });
  const { fleet } = rig;
  const slug = fleet.layout.fleet.slug;
  // The worker must ride out the outage: a crash fails the test at once, with the worker's log.
  const worker = await rig.startWorker();
  const watch = crashWatch(worker);
  const probe = async (path: '/healthz' | '/readyz') => {
    const res = await fetch(new URL(path, String(worker.ready.metricsUrl)));
    return { status: res.status, body: (await res.json()) as unknown };
  };
  expect(await probe('/readyz')).toEqual({ status: 200, body: expect.objectContaining({ status: 'ready' }) });
  api = await startChaosApi({ databaseUrl: pg.url(), temporalAddress, taskQueue });
  // The proxy routes only to a domain the monitor has seen serving (docs/architecture.md §5.4).
  await standbyReady(rig, fleet.east);
  expect(await proxiedCompletion(api.url, slug, MODEL)).toMatchObject({ status: 200, domain: 'east', routing: null });
  const before = await rig.routing();

  // Hold the promotion in wakeModels until the store is down.
  await fleet.west.sim.faults.set(MODEL, { wakeNoop: true });
  const { operation, handle } = await rig.promote(fleet.west);
  await rig.waitForStep(operation.id, 'wakeModels');
  await pg.stop();
  isStoreDown = true;
  await fleet.west.sim.faults.clear();

  // Traffic keeps flowing to the active it last knew, flagged as stale routing.
  const stale = await eventually(
    'a proxied answer on stale routing',
    async () => {
      const answer = await proxiedCompletion(api!.url, slug, MODEL);
      return answer.routing === 'stale' ? answer : null;
    },
    60_000,
  );
  expect(stale).toMatchObject({ status: 200, domain: 'east' });
  expect(stale.content).not.toBe('');

  // A worker activity hit the dead store and is being retried by Temporal.
  // drizzle reports a query the server could not run as `Failed query: …`.
  const untilCrash = <T>(wait: Promise<T>) => Promise.race([wait, watch.crashed]);
  const storeDown = /Failed query|ECONNREFUSED|terminat/;
  const retried = await untilCrash(
    eventually(
      'an activity retried after failing against the stopped store',
      async () => {
        const { raw } = await handle.describe();
        return raw.pendingActivities?.find((a) => (a.attempt ?? 0) > 1 && storeDown.test(a.lastFailure?.message ?? ''));
      },
      120_000,
      250,
    ),
  );
  expect(retried.activityType?.name).toBeTruthy();
  // Every answer while the store is down still comes from east.
  expect(await proxiedCompletion(api.url, slug, MODEL)).toMatchObject({ status: 200, domain: 'east' });
  // The worker's probes: alive (a restart would heal nothing), not ready, saying what is down.
  expect(await probe('/healthz')).toEqual({ status: 200, body: { status: 'ok' } });
  expect(await probe('/readyz')).toEqual({
    status: 503,
    body: { error: { code: 'state_store_unavailable', message: 'Postgres is unreachable' } },
  });

  await pg.start();
  isStoreDown = false;
  expect(await untilCrash(handle.result())).toMatchObject({ state: 'succeeded' });
  watch.dispose();
  expect(await probe('/readyz')).toMatchObject({ status: 200 });
  expect(await rig.routing()).toEqual({ activeDomainId: fleet.west.id, routeRevision: before.routeRevision + 1 });
  expect(await fleet.db.store.operations.get(operation.id)).toMatchObject({
    state: 'succeeded',
    routingCommitted: true,
  });
  const events = await fleet.db.store.events.list(fleet.fleetId, { limit: 1_000 });
  expect(events.filter((e) => e.type === 'routing.committed')).toHaveLength(1);

  // The API follows the move (push or revalidation) and serves from the new active, no longer stale.
  await eventually(
    'the proxy to route to west',
    async () => {
      const answer = await proxiedCompletion(api!.url, slug, MODEL);
      return answer.status === 200 && answer.domain === 'west' && answer.routing === null;
    },
    60_000,
  );
});
