/**
 * Chaos: the active's supervisor is frozen (SIGSTOP), not dead: its socket accepts connections and never
 * answers. The monitor must fail it by its policy (consecutive failed polls or a stale heartbeat) and fail
 * over; when the supervisor thaws (SIGCONT) and answers again, nothing flips back.
 */
import { signalPid } from '../../sim/processes';
import { checkNowSignal, healthQuery, monitorWorkflowId } from '../../workflows/definitions';
import { complete } from '../workflows/support/sim-fleet';
import { eventually, uniqueTaskQueue, useTestServer } from '../workflows/support/temporal';
import { type ChaosRig, startChaosRig } from './support/rig';

jest.setTimeout(300_000);

let rig: ChaosRig | undefined;
let frozenPid = 0;
const server = useTestServer(async () => {
  if (frozenPid) signalPid(frozenPid, 'SIGCONT');
  await rig?.close();
});

it('fails over from a frozen active supervisor within the policy, and SIGCONT does not flip routing back', async () => {
  rig = await startChaosRig({
    temporal: server,
    temporalAddress: process.env.TEMPORAL_TEST_ADDRESS!,
    taskQueue: uniqueTaskQueue('chaos-sigstop'),
    policy: { autoFailover: true },
  });
  const { fleet } = rig;
  const policy = fleet.layout.fleet.policy;
  await rig.startWorker();
  const monitor = server.client.workflow.getHandle(monitorWorkflowId(fleet.fleetId));
  await eventually(
    'the monitor to see west as a viable standby',
    async () => (await monitor.query(healthQuery))?.domains.find((d) => d.slug === 'west')?.isViableStandby,
    90_000,
    100,
  );
  const before = await rig.routing();

  frozenPid = fleet.east.sim.supervisorPid;
  const frozenAt = Date.now();
  signalPid(frozenPid, 'SIGSTOP');
  await eventually(
    'routing to move to west',
    async () => (await rig!.routing()).activeDomainId === fleet.west.id,
    120_000,
    50,
  );
  const movedAt = Date.now();

  const [operation] = await fleet.db.store.operations.list(fleet.fleetId);
  expect(operation).toMatchObject({ kind: 'promote', targetDomainId: fleet.west.id, requestedBy: 'monitor' });
  // Failed by the policy's own rules, not by anything else.
  expect(operation!.reason).toMatch(
    new RegExp(
      `consecutive polls \\(threshold ${policy.failureThreshold}\\)|stale after ${policy.heartbeatStaleMs} ms`,
    ),
  );
  expect((await fleet.db.store.domains.get(fleet.east.id))?.state).toBe('failed');
  console.log(
    `frozen supervisor: SIGSTOP -> routing moved in ${movedAt - frozenAt} ms ` +
      `(policy: ${policy.failureThreshold} polls every ${policy.heartbeatIntervalMs} ms, stale after ${policy.heartbeatStaleMs} ms); ` +
      `reason: ${operation!.reason}`,
  );
  expect(await complete(fleet.west.servingUrl)).not.toBe('');

  // Thaw it: the host answers again and looks healthy, but the routing stays where it is.
  const thawedAt = new Date();
  signalPid(frozenPid, 'SIGCONT');
  frozenPid = 0;
  await eventually(
    'a successful poll of the thawed east',
    async () => {
      const east = await fleet.db.store.domains.get(fleet.east.id);
      return east?.lastSeenAt && Date.parse(east.lastSeenAt) > thawedAt.getTime();
    },
    120_000,
    100,
  );
  // Ask for a decision with east healthy again, and wait until the monitor has made it.
  const askedAt = Date.now();
  await monitor.signal(checkNowSignal);
  const health = await eventually(
    'a monitor decision after the thaw',
    async () => {
      const h = await monitor.query(healthQuery);
      return h && Date.parse(h.checkedAt) > askedAt ? h : null;
    },
    60_000,
    100,
  );
  expect(health.domains.find((d) => d.slug === 'west')?.isActive).toBe(true);
  await server.client.workflow.getHandle(operation!.workflowId).result();
  expect(await rig.routing()).toEqual({ activeDomainId: fleet.west.id, routeRevision: before.routeRevision + 1 });
  const promotions = (await fleet.db.store.operations.list(fleet.fleetId)).filter((o) => o.kind === 'promote');
  expect(promotions).toHaveLength(1);
  const events = await fleet.db.store.events.list(fleet.fleetId, { limit: 1_000 });
  expect(events.filter((e) => e.type === 'routing.committed')).toHaveLength(1);
});
