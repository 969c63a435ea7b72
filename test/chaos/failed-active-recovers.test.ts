/**
 * Chaos: both domains go down (the standby's host killed, the active's supervisor then frozen), the active is
 * marked failed with no standby to promote; the active comes back and answers healthy for the recovery grace:
 * it is `ready` again, with an event. When the standby returns too, nothing fails over (the recovered active is
 * not failed over for no reason); a kill of the active afterwards is failed over. (The standby dies by a kill,
 * whose refusals the watcher sees: two domains silent at once would be a blind round, held against neither.)
 */
import { signalPid } from '../../sim/processes';
import { monitorWorkflowId } from '../../workflows/definitions';
import { eventually, uniqueTaskQueue, useTestServer } from '../workflows/support/temporal';
import { activeOf, killAndFailOver, reviveAsStandby, untilViableStandby } from './support/failover-again';
import { type ChaosRig, startChaosRig } from './support/rig';

jest.setTimeout(300_000);

let rig: ChaosRig | undefined;
const frozen = new Set<number>();
const cleanups: (() => Promise<void>)[] = [];
const server = useTestServer(async () => {
  for (const pid of frozen) signalPid(pid, 'SIGCONT');
  for (const fn of cleanups) await fn().catch(() => undefined);
  await rig?.close();
});

const stateOf = async (domainId: string) => (await rig!.fleet.db.store.domains.get(domainId))?.state;

it('a failed active that answers healthy for the grace is ready again and not failed over later', async () => {
  const recoveryMs = 3_000;
  rig = await startChaosRig({
    temporal: server,
    temporalAddress: process.env.TEMPORAL_TEST_ADDRESS!,
    taskQueue: uniqueTaskQueue('chaos-active-recovers'),
    policy: { autoFailover: true, failedActiveRecoveryMs: recoveryMs },
  });
  const { fleet } = rig;
  await rig.startWorker();
  const monitor = server.client.workflow.getHandle(monitorWorkflowId(fleet.fleetId));
  await untilViableStandby(monitor, fleet.west);

  const freeze = (pid: number) => (signalPid(pid, 'SIGSTOP'), frozen.add(pid));
  const thaw = (pid: number) => (signalPid(pid, 'SIGCONT'), frozen.delete(pid));
  const eastPid = fleet.east.sim.supervisorPid;
  await fleet.west.sim.kill();
  await eventually('west to fail', async () => (await stateOf(fleet.west.id)) === 'failed', 60_000, 50);
  freeze(eastPid);
  await eventually('east to be marked failed', async () => (await stateOf(fleet.east.id)) === 'failed', 60_000, 50);

  const thawedAt = Date.now();
  thaw(eastPid);
  await eventually('east to be ready again', async () => (await stateOf(fleet.east.id)) === 'ready', 60_000, 50);
  expect(Date.now() - thawedAt).toBeGreaterThanOrEqual(recoveryMs);
  const events = await fleet.db.store.events.list(fleet.fleetId, { limit: 1_000 });
  expect(events.filter((e) => e.domainId === fleet.east.id && e.type === 'domain.state').at(-1)).toMatchObject({
    data: { from: 'failed', to: 'ready' },
  });

  cleanups.push(await reviveAsStandby(fleet, fleet.west));
  await untilViableStandby(monitor, fleet.west);
  expect(await activeOf(fleet)).toBe(fleet.east.id);
  expect(await fleet.db.store.operations.list(fleet.fleetId)).toEqual([]);

  await killAndFailOver(fleet, fleet.east, fleet.west);
});
