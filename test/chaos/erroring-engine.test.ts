/**
 * Chaos: the active's vLLM engine errors. Its fake vLLM answers every inference request with a 500 in vLLM's
 * error shape (EngineCore failed) while `/health`, `/metrics` and the admin endpoints answer as usual, so
 * nothing but inference shows it. A client keeps sending one request a second through the proxy (every answer
 * a 500, none a served answer); the supervisor's synthetic completion answers 5xx twice in a row and it reports
 * the model `erroring` (supervisor/engine-progress.ts); the monitor fails the polls (`engine_stuck`) and fails
 * over, and the client is answered by the standby. Then the fleet fails over again.
 */
import { monitorWorkflowId } from '../../workflows/definitions';
import { MODEL } from '../workflows/support/sim-fleet';
import { eventually, uniqueTaskQueue, useTestServer } from '../workflows/support/temporal';
import { type ChaosApi, startChaosApi, steadyClient } from './support/api';
import { activeOf, killAndFailOver, reviveAsStandby, untilViableStandby } from './support/failover-again';
import { type ChaosRig, domainStateReasons, startChaosRig } from './support/rig';

jest.setTimeout(420_000);

let rig: ChaosRig | undefined;
let api: ChaosApi | undefined;
const cleanups: (() => Promise<void>)[] = [];
const server = useTestServer(async () => {
  for (const fn of cleanups) await fn().catch(() => undefined);
  await api?.close();
  await rig?.close();
});

it('fails over from an active whose engine answers every inference with a 500, under traffic, and fails over again', async () => {
  // The default poll policy: a poll every 500 ms, 3 failed polls; the supervisors' default wedge window (10 s:
  // an idle-looking engine gets a synthetic completion every 5 s, and at once again after a 5xx).
  const policy = { autoFailover: true, heartbeatIntervalMs: 500, heartbeatStaleMs: 5_000, failureThreshold: 3 };
  const taskQueue = uniqueTaskQueue('chaos-erroring');
  rig = await startChaosRig({
    temporal: server,
    temporalAddress: process.env.TEMPORAL_TEST_ADDRESS!,
    taskQueue,
    policy,
  });
  const { fleet } = rig;
  api = await startChaosApi({ databaseUrl: fleet.db.url, temporalAddress: rig.temporalAddress, taskQueue });
  await rig.startWorker();
  const monitor = server.client.workflow.getHandle(monitorWorkflowId(fleet.fleetId));
  await untilViableStandby(monitor, fleet.west);

  const client = steadyClient(api.url, fleet.layout.fleet.slug, MODEL);
  cleanups.push(() => client.stop());
  await eventually(
    'a first answer from east through the proxy',
    async () => client.answers.some((a) => a.status === 200 && a.domain === 'east'),
    30_000,
    50,
  );

  await fleet.east.sim.faults.set(MODEL, { error: true });
  const erroringAt = Date.now();
  // The client sees it: east answers 500s through the proxy.
  await eventually(
    'a client answered 500 by east',
    async () => client.answers.some((a) => a.at > erroringAt && a.status === 500 && a.domain === 'east'),
    30_000,
    50,
  );
  await eventually('routing to move to west', async () => (await activeOf(fleet)) === fleet.west.id, 120_000, 50);
  const movedAt = Date.now();
  const [operation] = await fleet.db.store.operations.list(fleet.fleetId);
  expect(operation).toMatchObject({ kind: 'promote', targetDomainId: fleet.west.id, requestedBy: 'monitor' });
  expect(operation!.reason).toMatch(new RegExp(`consecutive polls \\(threshold ${policy.failureThreshold}\\)`));
  // The polls failed on the supervisor's erroring verdict, its words in east's `domain.state` event.
  expect(await domainStateReasons(fleet, fleet.east.id)).toContainEqual(
    expect.stringMatching(/engine erroring: a synthetic completion answered .*500.* 2 times in a row/),
  );

  // The client is answered again, by west.
  const byWest = () => client.answers.filter((a) => a.at > erroringAt && a.status === 200 && a.domain === 'west');
  await eventually('a client answered by west', async () => byWest().length > 0, 60_000, 50);
  await client.stop();
  const tally = new Map<string, number>();
  for (const a of client.answers.filter((x) => x.at > erroringAt)) {
    const key = `${a.status ?? 'no answer'}${a.domain ? ` from ${a.domain}` : ''}`;
    tally.set(key, (tally.get(key) ?? 0) + 1);
  }
  console.log(
    `erroring engine (one request a second through the proxy): promotion decided in ` +
      `${Date.parse(operation!.createdAt) - erroringAt} ms, routing moved in ${movedAt - erroringAt} ms, the client ` +
      `first answered by west ${byWest()[0]!.at - erroringAt} ms after the fault; answers since: ` +
      `${[...tally].map(([key, n]) => `${n}× ${key}`).join(', ')}; reasons: ` +
      (await domainStateReasons(fleet, fleet.east.id)).filter((r) => /erroring/.test(r)).join(' | '),
  );

  // East comes back as a fresh standby (its engine sound), then west dies.
  cleanups.push(await reviveAsStandby(fleet, fleet.east));
  await untilViableStandby(monitor, fleet.east, 180_000);
  await killAndFailOver(fleet, fleet.west, fleet.east);
});
