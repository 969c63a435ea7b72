/**
 * Chaos: the state store goes away at an auto-failover's commit. A private PostgreSQL server backs the worker;
 * the active is killed, the monitor's promotion wakes and probes the standby, and its `commitRouting` is held by
 * a row lock on the fleet until the store is stopped. The store stays down past the commit's budget and several
 * bookkeeping budgets, then comes back: the commit must land then, in the same operation (the target probed
 * again, never compensated, no second promotion), and the fleet must fail over again afterwards.
 *
 * The worker's database driver queues the statements of attempts made while the store was away and sends them
 * once it answers, after Temporal gave those attempts up, so one of the first commit's could land by itself. The
 * store therefore comes back with the fleet row held again until the promotion has decided (it left the commit
 * step): the commit that lands is the one the promotion makes, and a compensation would show.
 */
import type { Client } from '@temporalio/client';
import postgres from 'postgres';
import { createDatabase, type HaruDatabase } from '../../db/client';
import { migrate } from '../../db/migrate';
import { createStore } from '../../db/store';
import { monitorWorkflowId } from '../../workflows/definitions';
import { hostState } from '../workflows/support/sim-fleet';
import { eventually, uniqueTaskQueue, useTestServer } from '../workflows/support/temporal';
import { crashWatch } from '../support/worker-process';
import { killAndFailOver, reviveAsStandby, untilViableStandby } from './support/failover-again';
import { type PrivatePostgres, startPrivatePostgres } from './support/private-postgres';
import { type ChaosRig, startChaosRig, vllmCalls } from './support/rig';

jest.setTimeout(420_000);

let pg: PrivatePostgres | undefined;
let database: HaruDatabase | undefined;
let rig: ChaosRig | undefined;
let storeIs: 'up' | 'down' | 'refusing-tcp' = 'up';
const cleanups: (() => Promise<void>)[] = [];

const server = useTestServer(async () => {
  // The store back first, so every client below can close cleanly even when the test failed mid-outage.
  if (storeIs === 'down') await pg?.start();
  if (storeIs === 'refusing-tcp') await pg?.admitTcp();
  for (const fn of cleanups) await fn().catch(() => undefined);
  await rig?.close();
  await database?.close();
  await pg?.destroy();
});

/** How many calls of activity `type` in a workflow's history ended without an answer (failed or timed out). */
async function callsEnded(client: Client, workflowId: string, type: string): Promise<number> {
  const history = await client.workflow.getHandle(workflowId).fetchHistory();
  const scheduled = new Map<string, string>();
  let ended = 0;
  for (const event of history.events ?? []) {
    const attrs = event.activityTaskScheduledEventAttributes;
    if (attrs) scheduled.set(String(event.eventId), attrs.activityType?.name ?? '');
    const end = event.activityTaskTimedOutEventAttributes ?? event.activityTaskFailedEventAttributes;
    if (end && scheduled.get(String(end.scheduledEventId)) === type) ended++;
  }
  return ended;
}

/**
 * Holds the fleet row from the one session of `sql`: the commit's NOWAIT lock fails, and is retried, until the
 * returned release, or until the store stops under the session.
 */
async function holdFleetRow(sql: postgres.Sql, fleetId: string): Promise<() => Promise<void>> {
  let held!: () => void;
  const isHeld = new Promise<void>((resolve) => (held = resolve));
  const session = sql
    .begin(async (tx) => {
      await tx`select id from fleets where id = ${fleetId} for no key update`;
      held();
      await new Promise<never>(() => undefined);
    })
    .catch(() => undefined);
  await isHeld;
  return async () => {
    await sql.end({ timeout: 1 }).catch(() => undefined);
    await session;
  };
}

it('an auto-failover whose commit meets a store outage commits once the store is back, without redoing the promotion', async () => {
  pg = await startPrivatePostgres();
  database = await createDatabase({ databaseUrl: pg.url(), max: 5 });
  await migrate(database);
  const db = { url: pg.url(), database, store: createStore(database), drop: async () => undefined };
  // The commit's budget is 3 s and a bookkeeping call's 2 s: the outage below outlasts both several times.
  const policy = { autoFailover: true, commitTimeoutMs: 3_000, bookkeepingBudgetMs: 2_000 };
  rig = await startChaosRig({
    temporal: server,
    temporalAddress: process.env.TEMPORAL_TEST_ADDRESS!,
    taskQueue: uniqueTaskQueue('chaos-commit-outage'),
    db,
    policy,
  });
  const { fleet } = rig;
  const { store } = fleet.db;
  const watch = crashWatch(await rig.startWorker());
  const untilCrash = <T>(wait: Promise<T>) => Promise.race([wait, watch.crashed]);
  const monitor = server.client.workflow.getHandle(monitorWorkflowId(fleet.fleetId));
  await untilCrash(untilViableStandby(monitor, fleet.west));
  const before = await rig.routing();
  expect(before.activeDomainId).toBe(fleet.east.id);
  const sleeps = async () => (await vllmCalls(fleet.west)).filter((c) => c.startsWith('POST /sleep')).length;
  // The standby's own sleep when it started.
  const sleepsBefore = await sleeps();

  // The active dies; the monitor's promotion reaches its commit, held by the fleet row lock.
  const release = await holdFleetRow(postgres(pg.url(), { max: 1, onnotice: () => {} }), fleet.fleetId);
  cleanups.push(release);
  await fleet.east.sim.kill();
  const failover = await untilCrash(
    eventually(
      'the monitor to start a promotion of west',
      async () => (await store.operations.list(fleet.fleetId)).find((o) => o.requestedBy === 'monitor'),
      120_000,
      50,
    ),
  );
  expect(failover).toMatchObject({ kind: 'promote', targetDomainId: fleet.west.id });
  await untilCrash(rig.waitForStep(failover.id, 'commitRouting'));
  expect(await rig.routing()).toEqual(before);

  // The store goes away with the commit in flight and stays away past its budget and two bookkeeping budgets.
  await pg.stop();
  storeIs = 'down';
  const downAt = Date.now();
  await release();
  await untilCrash(
    eventually(
      'the commit to spend its budget, then two bookkeeping calls theirs, against the stopped store',
      async () =>
        (await callsEnded(server.client, failover.workflowId, 'commitRouting')) >= 1 &&
        (await callsEnded(server.client, failover.workflowId, 'recordStep')) >= 2,
      120_000,
      500,
    ),
  );
  const handle = server.client.workflow.getHandle(failover.workflowId);
  expect((await handle.describe()).status.name).toBe('RUNNING');

  // Back, with the fleet row held before the worker reaches it: the attempts its driver queued find it held.
  await pg.start({ tcp: 'refused' });
  storeIs = 'refusing-tcp';
  const releaseAgain = await holdFleetRow(pg.socketSession(), fleet.fleetId);
  cleanups.push(releaseAgain);
  await pg.admitTcp();
  storeIs = 'up';
  const backAt = Date.now();
  await untilCrash(
    eventually(
      'the promotion to decide after its failed commit',
      async () => {
        const op = await store.operations.get(failover.id);
        return op?.state !== 'running' || op.step !== 'commitRouting';
      },
      120_000,
      25,
    ),
  );
  await releaseAgain();

  // The commit lands in the same operation: one promotion, one routing commit, nothing compensated.
  await untilCrash(
    eventually(
      'routing to move to west',
      async () => (await rig!.routing()).activeDomainId === fleet.west.id,
      120_000,
      50,
    ),
  );
  const movedAt = Date.now();
  console.log(
    `store outage at commit: down ${backAt - downAt} ms; routing moved ${movedAt - backAt} ms after the store returned`,
  );
  expect(await untilCrash(handle.result())).toMatchObject({ state: 'succeeded' });
  watch.dispose();
  expect(await rig.routing()).toEqual({ activeDomainId: fleet.west.id, routeRevision: before.routeRevision + 1 });
  expect(await store.operations.get(failover.id)).toMatchObject({
    state: 'succeeded',
    routingCommitted: true,
    routeRevision: before.routeRevision + 1,
  });
  expect((await store.operations.list(fleet.fleetId)).filter((o) => o.kind === 'promote')).toHaveLength(1);
  const events = await store.events.list(fleet.fleetId, { limit: 1_000 });
  expect(events.filter((e) => e.type === 'routing.committed')).toHaveLength(1);
  const ofFailover = events.filter((e) => e.operationId === failover.id);
  expect(ofFailover.filter((e) => e.data.step === 'compensate')).toEqual([]);
  expect(events.filter((e) => e.type === 'domain.restore')).toEqual([]);
  // The target was probed again before the commit made again.
  const probes = ofFailover.filter((e) => e.data.step === 'probeModels' && e.data.status === 'succeeded');
  expect(probes).toHaveLength(2);
  // The woken standby was never put back to sleep: it serves, its training stays stopped.
  expect(await sleeps()).toBe(sleepsBefore);
  const west = await hostState(fleet, fleet.west);
  expect(west.models).toEqual(['awake']);
  expect(west.training).not.toContain('running');

  // The fleet can fail over again: east comes back as a standby, then west dies.
  cleanups.push(await reviveAsStandby(fleet, fleet.east));
  await untilViableStandby(monitor, fleet.east, 180_000);
  await killAndFailOver(fleet, fleet.west, fleet.east);
});
