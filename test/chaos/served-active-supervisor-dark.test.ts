/**
 * Chaos: the active's supervisor alone goes dark (packets dropped, no RST) while clients keep being served by
 * its models through the proxy. Every poll of it goes unanswered, but users being served is the strongest
 * evidence there is (docs/architecture.md §9.2, the liveness rule): the proxy announces each served answer over
 * Postgres NOTIFY, the worker takes each as a sighting of the host (a poll unanswered while one came passes; the
 * others count only from the last one), and the active is neither failed nor failed over however long its
 * supervisor stays dark (here for many times the failure threshold's polls and twice the shortened stale
 * limit). Then the supervisor comes back and the fleet fails over again.
 */
import { workerCounter } from '../support/worker-process';
import { monitorWorkflowId } from '../../workflows/definitions';
import { MODEL } from '../workflows/support/sim-fleet';
import { eventually, uniqueTaskQueue, useTestServer } from '../workflows/support/temporal';
import { type ChaosApi, startChaosApi, steadyClient } from './support/api';
import { activeOf, killAndFailOver, untilViableStandby } from './support/failover-again';
import { relaySupervisor } from './support/relayed';
import { type ChaosRig, startChaosRig } from './support/rig';
import type { TcpRelay } from './support/tcp-relay';

jest.setTimeout(420_000);

let rig: ChaosRig | undefined;
let api: ChaosApi | undefined;
let relay: TcpRelay | undefined;
const cleanups: (() => Promise<void>)[] = [];
const server = useTestServer(async () => {
  for (const fn of cleanups) await fn().catch(() => undefined);
  await api?.close();
  await relay?.close();
  await rig?.close();
});

it('keeps a serving active whose supervisor alone went dark, past the failure threshold and the stale limit, and fails over a kill', async () => {
  // The default poll (every 500 ms, 3 failed polls), stale after 2 s (shortened): served answers keep east alive
  // while they come more often than 3 polls do (docs/architecture.md §9.2).
  const policy = { autoFailover: true, heartbeatIntervalMs: 500, heartbeatStaleMs: 2_000, failureThreshold: 3 };
  const taskQueue = uniqueTaskQueue('chaos-served-dark');
  rig = await startChaosRig({
    temporal: server,
    temporalAddress: process.env.TEMPORAL_TEST_ADDRESS!,
    taskQueue,
    policy,
  });
  const { fleet } = rig;
  const store = fleet.db.store;
  // The worker reaches east's supervisor only through a relay the test turns dark; the proxy reaches east's
  // model directly.
  relay = await relaySupervisor(fleet, 'east');
  api = await startChaosApi({ databaseUrl: fleet.db.url, temporalAddress: rig.temporalAddress, taskQueue });
  const worker = await rig.startWorker();
  const monitor = server.client.workflow.getHandle(monitorWorkflowId(fleet.fleetId));
  await untilViableStandby(monitor, fleet.west);
  const eastRow = async () => (await store.domains.listByFleet(fleet.fleetId)).find((d) => d.id === fleet.east.id)!;
  await eventually('east ready', async () => (await eastRow()).state === 'ready', 30_000, 50);

  // Traffic flows: a request every 250 ms through the proxy (its served answers are announced at most every
  // 250 ms per domain; an unanswered poll passes on one announced while it waits, and counts from the last one
  // announced before it otherwise).
  const client = steadyClient(api.url, fleet.layout.fleet.slug, MODEL, 250);
  cleanups.push(() => client.stop());
  await eventually(
    'a first answer from east through the proxy',
    async () => client.answers.some((a) => a.status === 200 && a.domain === 'east'),
    30_000,
    50,
  );

  const eastPolls = async () => ({
    ok: await workerCounter(worker, 'haru_worker_domain_polls_total', { domain: 'east', outcome: 'ok' }),
    failed: await workerCounter(worker, 'haru_worker_domain_polls_total', { domain: 'east', outcome: 'error' }),
  });
  const eventsBefore = Math.max(0, ...(await store.events.list(fleet.fleetId, { limit: 1_000 })).map((e) => e.id));
  await relay.goDark();
  const darkAt = Date.now();
  const before = await eastPolls();
  // It is dark: a status read through the relay gets no answer.
  await expect(fetch(`${relay.url}/v1/status`, { signal: AbortSignal.timeout(1_000) })).rejects.toThrow();

  // The monitor judges east for as many polls as span twice the stale limit (polls come at most one an
  // interval), far past the failure threshold: east stays dark all along.
  const polls = Math.ceil((2 * policy.heartbeatStaleMs) / policy.heartbeatIntervalMs) + 1;
  const during = await eventually(
    `${polls} polls of east while its supervisor is dark`,
    async () => {
      const now = await eastPolls();
      const delta = { ok: now.ok - before.ok, failed: now.failed - before.failed };
      return delta.ok + delta.failed >= polls ? delta : null;
    },
    120_000,
    100,
  );
  const darkForMs = Date.now() - darkAt;
  await client.stop();

  // Not failed, not failed over: routing stays on east, no operation, east never marked failed.
  expect(await activeOf(fleet)).toBe(fleet.east.id);
  expect(await store.operations.list(fleet.fleetId)).toEqual([]);
  expect((await eastRow()).state).toBe('ready');
  // Nor moved to any other state (stale, degraded) while dark.
  const moves = (await store.events.list(fleet.fleetId, { limit: 1_000 })).filter(
    (e) => e.type === 'domain.state' && e.domainId === fleet.east.id && e.id > eventsBefore,
  );
  expect(moves.map((e) => e.message)).toEqual([]);
  // Every client was served, by east.
  const served = client.answers.filter((a) => a.at > darkAt);
  expect(served.length).toBeGreaterThan(0);
  expect(served.filter((a) => a.status !== 200 || a.domain !== 'east')).toEqual([]);
  console.log(
    `supervisor dark, models serving: kept for ${darkForMs} ms (${during.ok + during.failed} polls of east: ` +
      `${during.ok} kept alive by served answers, ${during.failed} failed); ${served.length} clients served by east`,
  );

  // The supervisor comes back; a real death is still failed over.
  await relay.restore();
  await untilViableStandby(monitor, fleet.west);
  await killAndFailOver(fleet, fleet.east, fleet.west);
});
