/**
 * Chaos: the state store refuses connections on a promotion's failure path. The promotion is held in
 * wakeModels; the fleet's database then refuses every connection (its backends cut) for longer than the
 * wake budget and several bookkeeping budgets (both shortened by policy). The failed step's record, the
 * compensation's records and the outcome must wait the outage out: once the store is back the standby is
 * put back (asleep, training), the operation ends `failed` at wakeModels, and a kill of the active is
 * failed over as before.
 */
import type { Client, WorkflowHandle } from '@temporalio/client';
import { hostState, MODEL } from '../workflows/support/sim-fleet';
import { eventually, uniqueTaskQueue, useTestServer } from '../workflows/support/temporal';
import { type DatabaseOutage, databaseOutage } from './support/database-outage';
import { failsOverOnKill, standbyReady } from './support/failover';
import { type ChaosRig, startChaosRig } from './support/rig';

jest.setTimeout(300_000);

let rig: ChaosRig | undefined;
let outage: DatabaseOutage | undefined;
const server = useTestServer(async () => {
  // The store back first, so every client below can close cleanly even when the test failed mid-outage.
  await outage?.close();
  await rig?.close();
});

/** How many calls of activity `type` in the workflow's history spent their whole budget (timed out). */
async function budgetsSpent(client: Client, handle: WorkflowHandle, type: string): Promise<number> {
  const history = await client.workflow.getHandle(handle.workflowId).fetchHistory();
  const scheduled = new Map<string, string>();
  let spent = 0;
  for (const event of history.events ?? []) {
    const attrs = event.activityTaskScheduledEventAttributes;
    if (attrs) scheduled.set(String(event.eventId), attrs.activityType?.name ?? '');
    const timedOut = event.activityTaskTimedOutEventAttributes;
    if (timedOut && scheduled.get(String(timedOut.scheduledEventId)) === type) spent++;
  }
  return spent;
}

it('a store outage longer than the bookkeeping budget on the failure path still compensates and ends the operation', async () => {
  rig = await startChaosRig({
    temporal: server,
    temporalAddress: process.env.TEMPORAL_TEST_ADDRESS!,
    taskQueue: uniqueTaskQueue('chaos-store-outage'),
    policy: { autoFailover: true, wakeTimeoutMs: 4_000, bookkeepingBudgetMs: 2_000 },
  });
  const { fleet } = rig;
  outage = databaseOutage(fleet.db.url);
  await rig.startWorker();
  await standbyReady(rig, fleet.west);
  const before = await rig.routing();

  // Hold the promotion in wakeModels (the engine acknowledges /wake_up and stays asleep), then cut the store.
  await fleet.west.sim.faults.set(MODEL, { wakeNoop: true });
  const { operation, handle } = await rig.promote(fleet.west);
  await rig.waitForStep(operation.id, 'wakeModels');
  await outage.begin();

  // The wake budget runs out; recording the failure spends its budget on the refused store, more than once.
  await eventually(
    'the failed step record to spend two bookkeeping budgets against the refused store',
    async () => (await budgetsSpent(server.client, handle, 'recordStep')) >= 2,
    120_000,
    500,
  );
  // Still running: waiting for the store, not failed with the compensation skipped.
  expect((await handle.describe()).status.name).toBe('RUNNING');
  await outage.end();
  await fleet.west.sim.faults.clear();

  const failure = await handle.result().then(
    () => null,
    (err: Error & { cause?: Error }) => err,
  );
  expect(failure?.cause?.message).toMatch(/promotion failed at wakeModels/);
  expect(await fleet.db.store.operations.get(operation.id)).toMatchObject({
    state: 'failed',
    routingCommitted: false,
    error: { step: 'wakeModels' },
  });
  expect(await rig.routing()).toEqual(before);
  const events = await fleet.db.store.events.list(fleet.fleetId, { limit: 1_000 });
  const ofOperation = events.filter((e) => e.operationId === operation.id);
  expect(ofOperation.some((e) => e.data.step === 'wakeModels' && e.data.status === 'failed')).toBe(true);
  expect(ofOperation.some((e) => e.data.step === 'compensate' && e.data.status === 'succeeded')).toBe(true);
  expect(ofOperation.filter((e) => e.type === 'operation.finished')).toHaveLength(1);
  const west = await hostState(fleet, fleet.west);
  expect(west.models).toEqual(['asleep']);
  expect(west.training).toEqual(['running']);

  // Not wedged: the standby counts as ready again and a dead active is failed over to it.
  await standbyReady(rig, fleet.west);
  await failsOverOnKill(rig, fleet.east, fleet.west);
});
