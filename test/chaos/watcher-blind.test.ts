/**
 * Chaos: the worker loses its path to every supervisor of a fleet at once (packets dropped, no RST) while the
 * hosts themselves are fine and their models still serve. The watcher cannot tell that from every domain dying,
 * so it must hold: no domain marked failed, no failover, a `watcher.blind` event (and the gauge the
 * HaruWatcherBlind alert reads), past the stale limit and the failure threshold; when the path comes back it
 * says so, and the fleet still fails over a real death.
 */
import { seedLayout } from '../../db/testing';
import { monitorWorkflowId } from '../../workflows/definitions';
import { complete } from '../workflows/support/sim-fleet';
import { eventually, uniqueTaskQueue, useTestServer } from '../workflows/support/temporal';
import { killAndFailOver, untilViableStandby } from './support/failover-again';
import { type ChaosRig, startChaosRig } from './support/rig';
import { startTcpRelay, type TcpRelay } from './support/tcp-relay';

jest.setTimeout(300_000);

let rig: ChaosRig | undefined;
const relays: TcpRelay[] = [];
const server = useTestServer(async () => {
  for (const relay of relays) await relay.close();
  await rig?.close();
});

it('holds every failure while the worker reaches no domain of the fleet, says so, and fails over once it sees again', async () => {
  const policy = { autoFailover: true, heartbeatIntervalMs: 500, heartbeatStaleMs: 5_000, failureThreshold: 3 };
  rig = await startChaosRig({
    temporal: server,
    temporalAddress: process.env.TEMPORAL_TEST_ADDRESS!,
    taskQueue: uniqueTaskQueue('chaos-blind'),
    policy,
  });
  const { fleet } = rig;
  // The worker reaches each supervisor only through a relay the test can turn dark.
  const relayed = new Map<string, string>();
  for (const d of [fleet.east, fleet.west]) {
    const relay = await startTcpRelay({ host: '127.0.0.1', port: Number(new URL(d.supervisorUrl).port) });
    relays.push(relay);
    relayed.set(d.slug, relay.url);
  }
  await seedLayout(fleet.db.store, {
    ...fleet.layout,
    domains: fleet.layout.domains.map((d) => ({ ...d, supervisorUrl: relayed.get(d.slug)! })),
  });
  const worker = await rig.startWorker();
  const monitor = server.client.workflow.getHandle(monitorWorkflowId(fleet.fleetId));
  await untilViableStandby(monitor, fleet.west);
  const store = fleet.db.store;
  const before = await rig.routing();

  await Promise.all(relays.map((r) => r.goDark()));
  const darkAt = Date.now();
  await eventually(
    'the watcher.blind event',
    async () => (await store.events.list(fleet.fleetId, { limit: 1_000 })).some((e) => e.type === 'watcher.blind'),
    60_000,
    100,
  );
  const metrics = await (await fetch(String(worker.ready.metricsUrl))).text();
  expect(metrics).toMatch(new RegExp(`haru_worker_fleet_watcher_blind\\{fleet="${fleet.layout.fleet.slug}"\\} 1`));
  // Past the stale limit and the threshold's polls (with room for a loaded machine): nothing may move. Absence
  // cannot be awaited as a condition; the wait is the fault's length.
  const heldUntil = darkAt + policy.heartbeatStaleMs * 2;
  while (Date.now() < heldUntil) await new Promise((resolve) => setTimeout(resolve, 250));
  expect((await store.domains.listByFleet(fleet.fleetId)).map((d) => d.state)).toEqual(['ready', 'ready']);
  expect(await store.operations.list(fleet.fleetId)).toEqual([]);
  expect(await rig.routing()).toEqual(before);
  // The hosts were fine all along: clients of the active were still served.
  expect(await complete(fleet.east.servingUrl)).not.toBe('');

  await Promise.all(relays.map((r) => r.restore()));
  await eventually(
    'the watcher.sight event',
    async () => (await store.events.list(fleet.fleetId, { limit: 1_000 })).some((e) => e.type === 'watcher.sight'),
    60_000,
    100,
  );
  await untilViableStandby(monitor, fleet.west);
  await killAndFailOver(fleet, fleet.east, fleet.west);
});
