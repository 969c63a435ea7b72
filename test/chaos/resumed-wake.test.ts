/**
 * Chaos: a promotion resumed after a restart must re-prove what its wake depends on. The worker is
 * SIGKILLed inside wakeModels (the engine acknowledged /wake_up and stays asleep); while no worker runs,
 * the standby's training comes back (as a restarted host stack starts it). The resumed wake must refuse
 * to wake vLLM beside the trainers: the promotion fails at wakeModels with PreconditionLost, routing stays,
 * the standby stays a standby, and the fleet still fails over when the active dies.
 */
import { hostState, MODEL } from '../workflows/support/sim-fleet';
import { eventually, uniqueTaskQueue, useTestServer } from '../workflows/support/temporal';
import { failsOverOnKill, standbyReady } from './support/failover';
import { type ChaosRig, startChaosRig, vllmCalls } from './support/rig';

jest.setTimeout(300_000);

let rig: ChaosRig | undefined;
const server = useTestServer(async () => {
  await rig?.close();
});

it('a wake resumed after a restart that brought training back refuses to wake beside the trainers', async () => {
  rig = await startChaosRig({
    temporal: server,
    temporalAddress: process.env.TEMPORAL_TEST_ADDRESS!,
    taskQueue: uniqueTaskQueue('chaos-resumed-wake'),
    // Wide enough that the wake outlives the worker restart; the dead worker's attempt is retried after its heartbeat timeout.
    policy: { autoFailover: true, wakeTimeoutMs: 120_000 },
  });
  const { fleet } = rig;
  const first = await rig.startWorker();
  await standbyReady(rig, fleet.west);
  const before = await rig.routing();

  await fleet.west.sim.faults.set(MODEL, { wakeNoop: true });
  const { operation, handle } = await rig.promote(fleet.west);
  await rig.waitForStep(operation.id, 'wakeModels');
  await eventually('the wake to reach the engine', async () =>
    (await vllmCalls(fleet.west)).some((c) => c.startsWith('POST /wake_up')),
  );
  await first.kill();

  // The host stack restarts training while no worker runs.
  const started = await fetch(`${fleet.west.supervisorUrl}/v1/training/start`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ gpuIndex: 0 }),
  });
  expect(started.status).toBeLessThan(300);
  await eventually('training to run again on west', async () =>
    (await fleet.status(fleet.west)).training.every((r) => r.state === 'running'),
  );
  await fleet.west.sim.faults.clear();
  await rig.startWorker();

  const failure = await handle.result().then(
    () => null,
    (err: Error & { cause?: Error }) => err,
  );
  expect(failure?.cause?.message).toMatch(/promotion failed at wakeModels: training runs again on GPU 0/);
  expect(await fleet.db.store.operations.get(operation.id)).toMatchObject({
    state: 'failed',
    routingCommitted: false,
    error: { step: 'wakeModels', code: 'PreconditionLost' },
  });
  expect(await rig.routing()).toEqual(before);
  // The resumed attempt never asked the engine to wake: only the first (held) wake reached it.
  expect((await vllmCalls(fleet.west)).filter((c) => c.startsWith('POST /wake_up'))).toHaveLength(1);
  const west = await hostState(fleet, fleet.west);
  expect(west.models).toEqual(['asleep']);
  expect(west.training).toEqual(['running']);

  // Not wedged: a dead active is failed over to the standby (stopping its training properly this time).
  await standbyReady(rig, fleet.west);
  await failsOverOnKill(rig, fleet.east, fleet.west);
});
