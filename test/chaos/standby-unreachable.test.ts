/**
 * Chaos: the standby's supervisor becomes unreachable (connections refused) while it is being promoted.
 * The promotion must fail before the commit with routing untouched; its compensation keeps retrying, and
 * once the supervisor is reachable again the standby is put back on standby (asleep, training) and the
 * monitor counts it as ready again.
 */
import { hostState, MODEL } from '../workflows/support/sim-fleet';
import { eventually, uniqueTaskQueue, useTestServer } from '../workflows/support/temporal';
import { type ChaosRig, startChaosRig } from './support/rig';
import { relaySupervisor } from './support/relayed';
import type { TcpRelay } from './support/tcp-relay';

jest.setTimeout(300_000);

let rig: ChaosRig | undefined;
let relay: TcpRelay | undefined;
const server = useTestServer(async () => {
  await rig?.close();
  await relay?.close();
});

it('fails before commit when the standby supervisor is unreachable, routing unchanged, standby restored when it returns', async () => {
  rig = await startChaosRig({
    temporal: server,
    temporalAddress: process.env.TEMPORAL_TEST_ADDRESS!,
    taskQueue: uniqueTaskQueue('chaos-unreachable'),
    // The wake budget runs out while the host is unreachable; compensation has room to wait for it.
    policy: { wakeTimeoutMs: 8_000, sleepTimeoutMs: 120_000, startTrainingTimeoutMs: 120_000 },
  });
  const { fleet } = rig;
  // Haru reaches west's supervisor only through a relay the test can cut.
  relay = await relaySupervisor(fleet, 'west');
  await rig.startWorker();
  const before = await rig.routing();

  // Hold the promotion in wakeModels (the engine acknowledges /wake_up and stays asleep), then cut the host off.
  await fleet.west.sim.faults.set(MODEL, { wakeNoop: true });
  const { operation, handle } = await rig.promote(fleet.west);
  await rig.waitForStep(operation.id, 'wakeModels');
  await relay.cut();
  await fleet.west.sim.faults.clear();

  // The wake budget is spent against refused connections; compensation starts and cannot reach the host either.
  await rig.waitForStep(operation.id, 'compensate', 120_000);
  expect(await rig.routing()).toEqual(before);
  await relay.restore();

  const failure = await handle.result().then(
    () => null,
    (err: Error) => err,
  );
  expect((failure as Error & { cause?: Error })?.cause?.message).toMatch(/promotion failed at wakeModels/);
  const failed = await fleet.db.store.operations.get(operation.id);
  expect(failed).toMatchObject({ state: 'failed', routingCommitted: false, error: { step: 'wakeModels' } });
  expect(failed!.error!.message).toMatch(/ECONNREFUSED|unreachable|fetch failed|connect/i);
  expect(await rig.routing()).toEqual(before);
  const events = await fleet.db.store.events.list(fleet.fleetId, { limit: 1_000 });
  expect(events.filter((e) => e.type === 'routing.committed')).toHaveLength(0);

  // Back on standby: engines asleep, training running, and the monitor sees a ready domain again.
  const west = await hostState(fleet, fleet.west);
  expect(west.models).toEqual(['asleep']);
  expect(west.training).toEqual(['running']);
  expect(
    events.some((e) => e.operationId === operation.id && e.data.step === 'compensate' && e.data.status === 'succeeded'),
  ).toBe(true);
  await eventually(
    'the monitor to count west as ready again',
    async () => (await fleet.db.store.domains.get(fleet.west.id))?.state === 'ready',
    60_000,
    100,
  );
});
