/**
 * Chaos: the worker's clock and the API's differ by 30 s, one way and then the other. Hosts' clocks are never
 * compared (docs/architecture.md §9.2), so decisions must not change: an active whose supervisor is cut off
 * (packets dropped) while the proxy keeps serving its clients is kept, whichever clock is ahead (the proxy's
 * answers reach the worker as served answers dated by the worker itself); a killed active is still failed over.
 * The API runs in the test's process on the host's clock; each worker runs 30 s ahead of it, then 30 s behind
 * (test/support/clock-offset.cjs).
 */
import path from 'node:path';
import { monitorWorkflowId } from '../../workflows/definitions';
import { eventually, uniqueTaskQueue, useTestServer } from '../workflows/support/temporal';
import { type ChaosApi, proxiedCompletion, startChaosApi } from './support/api';
import { activeOf, killAndFailOver, untilViableStandby } from './support/failover-again';
import { type ChaosRig, startChaosRig } from './support/rig';
import { relaySupervisor } from './support/relayed';
import type { TcpRelay } from './support/tcp-relay';

jest.setTimeout(420_000);

const CLOCK_OFFSET = path.resolve(__dirname, '..', 'support', 'clock-offset.cjs');
const SKEW_MS = 30_000;

let rig: ChaosRig | undefined;
let api: ChaosApi | undefined;
let relay: TcpRelay | undefined;
const server = useTestServer(async () => {
  await api?.close();
  await relay?.close();
  await rig?.close();
});

it('keeps a served active whose supervisor is cut off with the worker 30 s ahead of the API and 30 s behind, and fails over a kill', async () => {
  const policy = { autoFailover: true, heartbeatIntervalMs: 500, heartbeatStaleMs: 5_000, failureThreshold: 3 };
  const taskQueue = uniqueTaskQueue('chaos-clock');
  rig = await startChaosRig({
    temporal: server,
    temporalAddress: process.env.TEMPORAL_TEST_ADDRESS!,
    taskQueue,
    policy,
  });
  const { fleet } = rig;
  // The worker reaches east's supervisor only through a relay the test can turn dark; clients reach east's
  // models directly through the proxy.
  relay = await relaySupervisor(fleet, 'east');
  api = await startChaosApi({ databaseUrl: fleet.db.url, temporalAddress: rig.temporalAddress, taskQueue });
  const monitor = server.client.workflow.getHandle(monitorWorkflowId(fleet.fleetId));
  const model = fleet.east.sim.models[0]!.name;
  const store = fleet.db.store;

  for (const offsetMs of [SKEW_MS, -SKEW_MS]) {
    const startedAt = Date.now();
    const worker = await rig.startWorker({
      NODE_OPTIONS: `${process.env.NODE_OPTIONS ?? ''} --require ${CLOCK_OFFSET}`.trim(),
      HARU_TEST_CLOCK_OFFSET_MS: String(offsetMs),
    });
    // The worker really runs on the skewed clock.
    expect(await workerClockSkewMs(String(worker.ready.metricsUrl), startedAt)).toBeGreaterThan(SKEW_MS / 2);
    await untilViableStandby(monitor, fleet.west);

    // One request a second through the proxy while east's supervisor is dark.
    let isSending = true;
    const statuses: number[] = [];
    const sending = (async () => {
      while (isSending) {
        statuses.push((await proxiedCompletion(api!.url, fleet.layout.fleet.slug, model)).status);
        await new Promise((resolve) => setTimeout(resolve, 250));
      }
    })();
    await eventually('a first answer through the proxy', async () => statuses.includes(200), 30_000, 50);
    await relay.goDark();
    const darkAt = Date.now();
    // Past the stale limit and many times the failure threshold's polls: east must be kept on its served
    // answers. Absence cannot be awaited as a condition; the wait is the fault's length.
    while (Date.now() < darkAt + policy.heartbeatStaleMs * 2) await new Promise((resolve) => setTimeout(resolve, 250));
    isSending = false;
    await sending;
    expect(await activeOf(fleet)).toBe(fleet.east.id);
    expect(await store.operations.list(fleet.fleetId)).toEqual([]);
    const east = (await store.domains.listByFleet(fleet.fleetId)).find((d) => d.id === fleet.east.id)!;
    expect(east.state).not.toBe('failed');
    expect(statuses.filter((s) => s !== 200)).toEqual([]);

    await relay.restore();
    await worker.kill();
  }

  // The last skew is still on: a real death is failed over.
  await rig.startWorker({
    NODE_OPTIONS: `${process.env.NODE_OPTIONS ?? ''} --require ${CLOCK_OFFSET}`.trim(),
    HARU_TEST_CLOCK_OFFSET_MS: String(-SKEW_MS),
  });
  await untilViableStandby(monitor, fleet.west);
  await killAndFailOver(fleet, fleet.east, fleet.west);
});

/**
 * How far the worker's clock is from this process's (ms, rounded to seconds): its `process_start_time_seconds`
 * is its own clock at start less its uptime, compared with when this process started it.
 */
async function workerClockSkewMs(metricsUrl: string, startedAtMs: number): Promise<number> {
  const metrics = await (await fetch(metricsUrl)).text();
  const startSeconds = Number(/^process_start_time_seconds (\d+)/m.exec(metrics)![1]);
  return Math.abs(startSeconds * 1_000 - startedAtMs);
}
