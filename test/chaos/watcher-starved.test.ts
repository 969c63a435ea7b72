/**
 * Chaos: the watcher itself stops, not the hosts. The worker process is SIGSTOPped for 3 s (a VM paused, a long
 * GC), then starved of CPU (stopped 1.2 s of every 1.3 s): polls in flight time out while it cannot run, and
 * their deadlines fire late, after the answers already wait in its sockets. No domain may be marked failed and
 * nothing may fail over for it; then the active really dies and the fleet fails over.
 */
import { signalPid } from '../../sim/processes';
import { monitorWorkflowId } from '../../workflows/definitions';
import { uniqueTaskQueue, useTestServer } from '../workflows/support/temporal';
import { eventually } from '../../test/support/eventually';
import { killAndFailOver, untilViableStandby } from './support/failover-again';
import { type ChaosRig, startChaosRig } from './support/rig';

jest.setTimeout(300_000);

let rig: ChaosRig | undefined;
let stoppedPid = 0;
const server = useTestServer(async () => {
  if (stoppedPid) signalPid(stoppedPid, 'SIGCONT');
  await rig?.close();
});

it('marks no domain failed while the worker itself is stopped for 3 s, then starved, and then fails over a real death', async () => {
  // The default poll policy: a poll every 500 ms, 1 s to answer, 3 failed polls, stale after 5 s.
  rig = await startChaosRig({
    temporal: server,
    temporalAddress: process.env.TEMPORAL_TEST_ADDRESS!,
    taskQueue: uniqueTaskQueue('chaos-starved'),
    policy: { autoFailover: true, heartbeatIntervalMs: 500, heartbeatStaleMs: 5_000, failureThreshold: 3 },
  });
  const { fleet } = rig;
  const worker = await rig.startWorker();
  const monitor = server.client.workflow.getHandle(monitorWorkflowId(fleet.fleetId));
  await untilViableStandby(monitor, fleet.west);
  const store = fleet.db.store;
  const before = await rig.routing();

  /** Until the worker has polled both domains after `sinceMs`: every poll it made meanwhile was judged. */
  const untilPolledSince = (sinceMs: number) =>
    eventually(
      'a poll of each domain after the stop',
      async () => {
        const domains = await store.domains.listByFleet(fleet.fleetId);
        return domains.every((d) => d.lastSeenAt && Date.parse(d.lastSeenAt) > sinceMs) ? domains : null;
      },
      60_000,
      50,
    );
  const pause = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

  // One stop of 3 s, landing wherever the worker's rounds are: past the 1 s poll timeout, short of the 5 s
  // stale limit.
  stoppedPid = worker.pid;
  signalPid(worker.pid, 'SIGSTOP');
  await pause(3_000);
  signalPid(worker.pid, 'SIGCONT');
  stoppedPid = 0;
  await untilPolledSince(Date.now());

  // Then starved for 8 s: 100 ms of CPU in every 1.3 s, as a worker on an overloaded machine gets. Each poll it
  // sends is answered while it cannot run, and when it runs again the expired deadline's timer comes first: its
  // polls time out several in a row.
  const starvedUntil = Date.now() + 8_000;
  while (Date.now() < starvedUntil) {
    stoppedPid = worker.pid;
    signalPid(worker.pid, 'SIGSTOP');
    await pause(1_200);
    signalPid(worker.pid, 'SIGCONT');
    stoppedPid = 0;
    await pause(100);
  }
  await untilPolledSince(Date.now());

  const domains = await store.domains.listByFleet(fleet.fleetId);
  expect(domains.map((d) => [d.slug, d.state])).toEqual([
    ['east', 'ready'],
    ['west', 'ready'],
  ]);
  const moves = (await store.events.list(fleet.fleetId, { limit: 1_000 })).filter((e) => e.type === 'domain.state');
  expect(moves.map((e) => e.message)).not.toContainEqual(expect.stringMatching(/-> failed/));
  expect(await store.operations.list(fleet.fleetId)).toEqual([]);
  expect(await rig.routing()).toEqual(before);

  // The detector still works: the active really dies and the fleet fails over.
  await killAndFailOver(fleet, fleet.east, fleet.west);
});
