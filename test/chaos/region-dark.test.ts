/**
 * Chaos: the active's region goes dark. Its supervisor's packets vanish (SYNs dropped, no RST: a listener whose
 * accept queue is full takes its port), which is how a dead region looks from another one. Every poll of it must
 * end at its own deadline, the standby's polls must not wait on it, and the monitor must fail over by its failed
 * polls while the region stays dark; then the fleet fails over again.
 */
import { monitorWorkflowId } from '../../workflows/definitions';
import { eventually, uniqueTaskQueue, useTestServer } from '../workflows/support/temporal';
import { killAndFailOver, reviveAsStandby, untilViableStandby } from './support/failover-again';
import { type ChaosRig, startChaosRig } from './support/rig';
import { relaySupervisor } from './support/relayed';
import type { TcpRelay } from './support/tcp-relay';

jest.setTimeout(420_000);

let rig: ChaosRig | undefined;
let relay: TcpRelay | undefined;
const cleanups: (() => Promise<void>)[] = [];
const server = useTestServer(async () => {
  for (const fn of cleanups) await fn().catch(() => undefined);
  await relay?.close();
  await rig?.close();
});

it('fails over from an active whose region went dark while it stays dark, and fails over again', async () => {
  // The default poll policy: a poll every 500 ms, 1 s to answer, 3 failed polls, stale after 5 s.
  const policy = { autoFailover: true, heartbeatIntervalMs: 500, heartbeatStaleMs: 5_000, failureThreshold: 3 };
  rig = await startChaosRig({
    temporal: server,
    temporalAddress: process.env.TEMPORAL_TEST_ADDRESS!,
    taskQueue: uniqueTaskQueue('chaos-dark'),
    policy,
  });
  const { fleet } = rig;
  // Haru reaches east's supervisor only through a relay the test can turn dark.
  relay = await relaySupervisor(fleet, 'east');
  await rig.startWorker();
  const monitor = server.client.workflow.getHandle(monitorWorkflowId(fleet.fleetId));
  await untilViableStandby(monitor, fleet.west);

  await relay.goDark();
  const darkAt = Date.now();
  await eventually(
    'routing to move to west while east stays dark',
    async () => (await rig!.routing()).activeDomainId === fleet.west.id,
    120_000,
    50,
  );
  const movedAt = Date.now();
  const [operation] = await fleet.db.store.operations.list(fleet.fleetId);
  expect(operation).toMatchObject({ kind: 'promote', targetDomainId: fleet.west.id, requestedBy: 'monitor' });
  // Decided on failed polls that each ended at their own deadline, not on a heartbeat gone stale behind polls
  // that hung in their connect for the dispatcher's connect timeout.
  expect(operation!.reason).toMatch(new RegExp(`consecutive polls \\(threshold ${policy.failureThreshold}\\)`));
  const decidedMs = Date.parse(operation!.createdAt) - darkAt;
  console.log(
    `region dark: packets dropped -> promotion decided in ${decidedMs} ms, routing moved in ${movedAt - darkAt} ms; ` +
      `reason: ${operation!.reason}`,
  );

  // East stays dark past every bound it meets (the Agent's 5 s connect timeout, the 5 s stale limit, the old
  // active's demotion budgets): routing stays on west and nothing else is started.
  const darkUntil = darkAt + 12_000;
  while (Date.now() < darkUntil) await new Promise((resolve) => setTimeout(resolve, 250));
  expect((await rig.routing()).activeDomainId).toBe(fleet.west.id);
  expect((await fleet.db.store.operations.list(fleet.fleetId)).filter((o) => o.kind === 'promote')).toHaveLength(1);

  // The fleet can fail over again: east's region comes back with a fresh host as a standby, then west dies.
  await relay.restore();
  cleanups.push(await reviveAsStandby(fleet, fleet.east));
  await untilViableStandby(monitor, fleet.east, 180_000);
  await killAndFailOver(fleet, fleet.west, fleet.east);
});
