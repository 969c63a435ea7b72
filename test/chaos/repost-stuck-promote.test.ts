/**
 * Chaos: an operator re-posts a promote that looks stuck. The promotion is held in wakeModels (the
 * engine acknowledges /wake_up and stays asleep); the same promote is posted again through the API while
 * it waits, and once more after the run failed. Each re-post must join the one operation and never start
 * a second run of it; the one run's compensation must put the whole standby back (models asleep,
 * training running), and the fleet must still fail over when the active dies.
 */
import type { WorkflowExecutionDescription } from '@temporalio/client';
import { hostState, MODEL } from '../workflows/support/sim-fleet';
import { uniqueTaskQueue, useTestServer } from '../workflows/support/temporal';
import { type ChaosApi, startChaosApi } from './support/api';
import { failsOverOnKill, standbyReady } from './support/failover';
import { type ChaosRig, startChaosRig } from './support/rig';

jest.setTimeout(300_000);

let rig: ChaosRig | undefined;
let api: ChaosApi | undefined;
const server = useTestServer(async () => {
  await api?.close();
  await rig?.close();
});

const repost = async (slug: string) => {
  const res = await fetch(`${api!.url}/v1/fleets/${slug}/promote`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ targetDomainId: 'west', reason: 'looks stuck' }),
  });
  return { status: res.status, body: (await res.json()) as { status: string; operation: { id: string } } };
};

const runOf = (d: WorkflowExecutionDescription) => ({ runId: d.runId, status: d.status.name });

it('a re-posted stuck promote joins the one run, which compensates the whole standby', async () => {
  rig = await startChaosRig({
    temporal: server,
    temporalAddress: process.env.TEMPORAL_TEST_ADDRESS!,
    taskQueue: uniqueTaskQueue('chaos-repost'),
    policy: { autoFailover: true, wakeTimeoutMs: 8_000 },
  });
  const { fleet } = rig;
  await rig.startWorker();
  api = await startChaosApi({
    databaseUrl: fleet.db.url,
    temporalAddress: rig.temporalAddress,
    taskQueue: rig.taskQueue,
  });
  await standbyReady(rig, fleet.west);
  const before = await rig.routing();

  await fleet.west.sim.faults.set(MODEL, { wakeNoop: true });
  const { operation, handle } = await rig.promote(fleet.west);
  await rig.waitForStep(operation.id, 'wakeModels');
  const first = runOf(await handle.describe());
  expect(first.status).toBe('RUNNING');

  // Re-posted while it waits: the same operation, the same run.
  const joined = await repost(fleet.layout.fleet.slug);
  expect(joined).toMatchObject({ status: 202, body: { status: 'joined', operation: { id: operation.id } } });
  expect(runOf(await handle.describe())).toEqual(first);

  // The wake budget runs out; the one run compensates everything it started.
  const failure = await handle.result().then(
    () => null,
    (err: Error & { cause?: Error }) => err,
  );
  expect(failure?.cause?.message).toMatch(/promotion failed at wakeModels/);
  await fleet.west.sim.faults.clear();
  expect(await fleet.db.store.operations.get(operation.id)).toMatchObject({ state: 'failed', routingCommitted: false });
  const west = await hostState(fleet, fleet.west);
  expect(west.models).toEqual(['asleep']);
  expect(west.training).toEqual(['running']);
  expect(await rig.routing()).toEqual(before);

  // Starting the closed operation again (as a re-post that joined it would) is refused: no second run.
  const orchestrator = server.orchestrator(rig.taskQueue);
  expect(await orchestrator.startOperation((await fleet.db.store.operations.get(operation.id))!)).toBe(
    'already_started',
  );
  expect(runOf(await handle.describe())).toEqual({ runId: first.runId, status: 'FAILED' });
  const events = await fleet.db.store.events.list(fleet.fleetId, { limit: 1_000 });
  const compensated = events.filter(
    (e) => e.operationId === operation.id && e.data.step === 'compensate' && e.data.status === 'succeeded',
  );
  expect(compensated).toHaveLength(1);
  // Stuck before the wake: nothing to sleep, training back on the standby's GPU (restored from what it shows).
  expect(compensated[0]!.message).toMatch(/^target back on standby \(no GPU to sleep, training started on GPU 0\)/);

  // Not wedged: a dead active is failed over to the restored standby.
  await standbyReady(rig, fleet.west);
  await failsOverOnKill(rig, fleet.east, fleet.west);
});
