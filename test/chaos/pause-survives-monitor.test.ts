/**
 * Chaos: a pause of automatic failover outlives the monitor. The pause is asked for through the API, the
 * monitor workflow is terminated and started again by the worker, the active dies: the new run obeys the
 * stored pause (marks the active failed, promotes nothing). A resume through the API then fails over.
 */
import { healthQuery, monitorWorkflowId } from '../../workflows/definitions';
import { eventually, uniqueTaskQueue, useTestServer } from '../workflows/support/temporal';
import { type ChaosApi, startChaosApi } from './support/api';
import { activeOf, untilViableStandby } from './support/failover-again';
import { type ChaosRig, startChaosRig } from './support/rig';

jest.setTimeout(300_000);

let rig: ChaosRig | undefined;
let api: ChaosApi | undefined;
const server = useTestServer(async () => {
  await api?.close();
  await rig?.close();
});

const post = async (path: string, body: unknown) => {
  const res = await fetch(`${api!.url}${path}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify(body),
  });
  return { status: res.status, body: (await res.json()) as Record<string, unknown> };
};

it('a pause stored through the API holds across a recreated monitor; resume fails over', async () => {
  const taskQueue = uniqueTaskQueue('chaos-pause');
  rig = await startChaosRig({
    temporal: server,
    temporalAddress: process.env.TEMPORAL_TEST_ADDRESS!,
    taskQueue,
    policy: { autoFailover: true },
    workerEnv: { HARU_MONITOR_KEEP_INTERVAL_MS: '1000' },
  });
  const { fleet } = rig;
  await rig.startWorker();
  api = await startChaosApi({ databaseUrl: fleet.db.url, temporalAddress: rig.temporalAddress, taskQueue });
  const monitor = server.client.workflow.getHandle(monitorWorkflowId(fleet.fleetId));
  await untilViableStandby(monitor, fleet.west);

  const paused = await post(`/v1/fleets/${fleet.layout.fleet.slug}/pause`, { reason: 'chaos: maintenance' });
  expect(paused).toMatchObject({
    status: 200,
    body: { changed: true, autoFailoverPause: { by: 'api', reason: 'chaos: maintenance' } },
  });
  const snapshot = (await (await fetch(`${api.url}/v1/fleets/${fleet.fleetId}`)).json()) as Record<string, unknown>;
  expect(snapshot.autoFailoverPause).toMatchObject({ by: 'api', reason: 'chaos: maintenance' });

  const { runId } = await monitor.describe();
  await monitor.terminate('chaos: the monitor dies while paused');
  await eventually(
    'a new monitor run',
    async () => {
      const d = await monitor.describe();
      return d.runId !== runId && d.status.name === 'RUNNING';
    },
    60_000,
    100,
  );

  await fleet.east.sim.kill();
  await eventually(
    'the new monitor to hold the failover for the stored pause',
    async () => {
      const health = await monitor.query(healthQuery);
      return (
        health?.failoverBlockedBy === 'paused' && health.domains.find((d) => d.slug === 'east')?.state === 'failed'
      );
    },
    90_000,
    100,
  );
  expect(await activeOf(fleet)).toBe(fleet.east.id);
  expect(await fleet.db.store.operations.list(fleet.fleetId)).toEqual([]);

  const resumed = await post(`/v1/fleets/${fleet.fleetId}/resume`, {});
  expect(resumed).toMatchObject({ status: 200, body: { changed: true, autoFailoverPause: null } });
  await eventually('routing to move to west', async () => (await activeOf(fleet)) === fleet.west.id, 120_000, 50);

  const events = await fleet.db.store.events.list(fleet.fleetId, { limit: 1_000 });
  expect(events.filter((e) => e.type === 'fleet.paused').map((e) => e.data)).toEqual([
    { by: 'api', reason: 'chaos: maintenance' },
  ]);
  expect(events.filter((e) => e.type === 'fleet.resumed').map((e) => e.data)).toEqual([{ by: 'api', reason: null }]);
});
