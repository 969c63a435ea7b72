/**
 * Chaos: a promotion's operation ends at the routing commit as far as the next failover goes. East (the
 * active) dies and the monitor fails over to west; the demotion of dead east goes on retrying and then
 * draining (east came back serving a long request, so its drain waits out a two-minute budget). West dies
 * in that window: the monitor asks the committed promotion to end, which cancels the demotion and waits for
 * it, and the fleet fails over to east at once instead of after the drain budget.
 */
import { MODEL } from '../workflows/support/sim-fleet';
import { eventually, uniqueTaskQueue, useTestServer } from '../workflows/support/temporal';
import { reviveAsStandby } from './support/failover-again';
import { failsOverOnKill, standbyReady } from './support/failover';
import { type ChaosRig, startChaosRig } from './support/rig';

jest.setTimeout(300_000);

let rig: ChaosRig | undefined;
let stopRevived: (() => Promise<void>) | undefined;
const longRequest = new AbortController();
const server = useTestServer(async () => {
  longRequest.abort();
  await stopRevived?.();
  await rig?.close();
});

it('a new active that dies while the old active is still being demoted is failed over at once', async () => {
  rig = await startChaosRig({
    temporal: server,
    temporalAddress: process.env.TEMPORAL_TEST_ADDRESS!,
    taskQueue: uniqueTaskQueue('chaos-demotion-blocks'),
    policy: { autoFailover: true, drainTimeoutMs: 120_000 },
  });
  const { fleet } = rig;
  const store = fleet.db.store;
  await rig.startWorker();
  await standbyReady(rig, fleet.west);
  const first = await failsOverOnKill(rig, fleet.east, fleet.west);
  expect((await store.operations.get(first.id))?.state).toBe('running');

  // East comes back serving, with a request that outlasts the drain budget.
  stopRevived = await reviveAsStandby(fleet, fleet.east, 'active');
  await fleet.east.sim.faults.set(MODEL, { tokensPerSecond: 2 });
  void fetch(`${fleet.east.servingUrl}/chat/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ model: MODEL, messages: [{ role: 'user', content: 'hi' }], max_tokens: 1_000 }),
    signal: longRequest.signal,
  }).catch(() => undefined);
  await eventually(
    'the long request to run on east',
    async () => ((await fleet.status(fleet.east)).models[0]?.runningRequests ?? 0) > 0,
    30_000,
    50,
  );
  await standbyReady(rig, fleet.east);
  // The demotion is still draining (it waits for the request): the window this test is about.
  const draining = await store.operations.get(first.id);
  expect(draining).toMatchObject({ state: 'running', step: 'demoteOldActive' });

  // West dies while east's demotion drains: within far less than the drain budget the fleet is on east again.
  const killedAt = Date.now();
  await fleet.west.sim.kill();
  await eventually(
    'the monitor to fail west over to east',
    async () => (await rig!.routing()).activeDomainId === fleet.east.id,
    60_000,
    50,
  );
  console.log(`failed over again ${Date.now() - killedAt} ms after the kill (drain budget 120000 ms)`);
  expect(await store.operations.get(first.id)).toMatchObject({ state: 'succeeded', routingCommitted: true });
  const steps = (await store.events.list(fleet.fleetId, { limit: 1_000 })).filter(
    (e) => e.operationId === first.id && e.type === 'operation.step',
  );
  expect(steps.some((e) => /demotion cut short: the next failover needs the fleet/.test(e.message))).toBe(true);
  const second = (await store.operations.list(fleet.fleetId)).find(
    (o) => o.requestedBy === 'monitor' && o.targetDomainId === fleet.east.id && o.routingCommitted,
  );
  expect(second).toBeDefined();
});
