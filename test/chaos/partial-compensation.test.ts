/**
 * Chaos: one dead model must not leave every training GPU idle. West has two GPUs (one model and one
 * trainer each). A promotion of west is under way when the engine on GPU 1 stops answering (it refuses
 * connections, as a crashed vLLM does to its supervisor): the wake runs out of budget and compensation
 * puts back what the supervisor shows per GPU: GPU 0's model asleep and its training running again, GPU 1
 * reported (west `degraded` by the restore, unless the monitor failed it first, and a `domain.restore` event
 * naming it). Once the engine answers again a later
 * look of the monitor finishes the repair (training back on GPU 1), and the fleet still fails over.
 */
import { MODELS } from '../workflows/support/sim-fleet';
import { eventually, uniqueTaskQueue, useTestServer } from '../workflows/support/temporal';
import { failsOverOnKill, standbyReady } from './support/failover';
import { type ChaosRig, startChaosRig } from './support/rig';

jest.setTimeout(300_000);

let rig: ChaosRig | undefined;
const server = useTestServer(async () => {
  await rig?.close();
});

it('a dead model on one GPU: compensation restores the other GPU, and the monitor finishes the repair later', async () => {
  rig = await startChaosRig({
    temporal: server,
    temporalAddress: process.env.TEMPORAL_TEST_ADDRESS!,
    taskQueue: uniqueTaskQueue('chaos-partial-compensation'),
    gpus: 2,
    policy: { autoFailover: true, wakeTimeoutMs: 8_000 },
  });
  const { fleet } = rig;
  const store = fleet.db.store;
  await rig.startWorker();
  await standbyReady(rig, fleet.west);

  await fleet.west.sim.faults.set(MODELS[1], { refuse: true });
  const { operation, handle } = await rig.promote(fleet.west);
  await expect(handle.result()).rejects.toThrow();
  expect(await store.operations.get(operation.id)).toMatchObject({
    state: 'failed',
    routingCommitted: false,
    error: { step: 'wakeModels' },
  });

  // Compensated from what the host showed: GPU 0 is back at rest, GPU 1 is reported, not assumed.
  const status = await fleet.status(fleet.west);
  expect(status.models.find((m) => m.name === MODELS[0])?.state).toBe('asleep');
  expect(status.training.find((r) => r.gpuIndex === 0)?.state).toBe('running');
  expect(status.training.find((r) => r.gpuIndex === 1)?.state).toBe('idle');
  // The restore's own outcome, read from the event log apart from the monitor's verdicts on west.
  const westEvents = async () =>
    (await store.events.list(fleet.fleetId, { limit: 1_000 })).filter((e) => e.domainId === fleet.west.id);
  /** The state west's event log gives: each verdict of the monitor's, and the restore's own degrading. */
  const stateBy = (events: { type: string; data: unknown }[]) =>
    events.reduce<string>((state, e) => {
      const data = e.data as { to?: string; degraded?: boolean };
      if (e.type === 'domain.state' && data.to) return data.to;
      return e.type === 'domain.restore' && data.degraded ? 'degraded' : state;
    }, 'ready');
  const first = await westEvents();
  const restoreAt = first.findIndex((e) => e.type === 'domain.restore');
  const restore = first[restoreAt]!;
  expect(restore.message).toMatch(/training started on GPU 0/);
  expect(restore.message).toMatch(/training not restarted on GPU 1: qwen-1b does not answer/);
  expect(restore.data).toMatchObject({
    trainingStartedGpus: [0],
    problems: expect.arrayContaining(['training not restarted on GPU 1: qwen-1b does not answer']),
  });
  // The restore degraded west exactly when it found it ready; a monitor's verdict may have come first (its poll
  // reads a model port with no process behind it as gone, core/poll-verdict.ts) and then it left it alone.
  expect((restore.data as { degraded: boolean }).degraded).toBe(stateBy(first.slice(0, restoreAt)) === 'ready');
  expect(stateBy(first.slice(0, restoreAt + 1))).not.toBe('ready');
  // The stored state is the log's last word (state and log are read together until they agree: a verdict may
  // land between the two reads).
  await eventually(
    "west's state to be the one its event log gives",
    async () => (await store.domains.get(fleet.west.id))?.state === stateBy(await westEvents()),
    10_000,
    100,
  );

  // The engine answers again: the monitor's next repair puts GPU 1 back too, by itself.
  await fleet.west.sim.faults.clear(MODELS[1]);
  await eventually(
    'the monitor to restart training on GPU 1',
    async () => (await fleet.status(fleet.west)).training.every((r) => r.state === 'running'),
    90_000,
    200,
  );
  expect((await fleet.status(fleet.west)).models.map((m) => m.state)).toEqual(['asleep', 'asleep']);
  const repairs = (await store.events.list(fleet.fleetId, { limit: 1_000 })).filter(
    (e) => e.type === 'domain.restore' && e.domainId === fleet.west.id,
  );
  expect(repairs.some((e) => /training started on GPU 1/.test(e.message))).toBe(true);

  await standbyReady(rig, fleet.west);
  await failsOverOnKill(rig, fleet.east, fleet.west);
});
