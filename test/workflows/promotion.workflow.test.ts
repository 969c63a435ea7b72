/**
 * Promotions end to end: the real worker and activities, the real dev server, Postgres, and two simulated
 * domains (real supervisor, fake vLLM and trainer processes). One fleet serves the tests in order; every
 * failure test also proves the fleet is back where it was, so the next one starts from a clean standby.
 */
import type { Operation } from '../../schemas/entities';
import type { FleetPolicy } from '../../schemas/policy';
import { setHolding } from '../../sim/gpu-state';
import { abortSignal, progressQuery, type PromotionInput } from '../../workflows/definitions';
import { promotionWorkflow } from '../../workflows';
import {
  complete,
  hostState,
  MODEL,
  type SimFleet,
  type SimFleetDomain,
  startSimFleet,
  TEST_POLICY,
} from './support/sim-fleet';
import { eventually, uniqueTaskQueue, useTestServer } from './support/temporal';
import { replayAndRecord, startTestWorker } from './support/worker';

jest.setTimeout(180_000);

let fleet: SimFleet;
let worker: Awaited<ReturnType<typeof startTestWorker>>;
const taskQueue = uniqueTaskQueue('promotion');
const server = useTestServer(async () => {
  await worker?.stop();
  await fleet?.close();
});

beforeAll(async () => {
  fleet = await startSimFleet();
  worker = await startTestWorker(server.connection, fleet.db.store, taskQueue);
});

const store = () => fleet.db.store;
const routing = async () => {
  const s = (await store().fleets.snapshot(fleet.fleetId))!;
  return { activeDomainId: s.activeDomainId, routeRevision: s.routeRevision };
};
const roles = async () => {
  const { activeDomainId } = await routing();
  return {
    active: fleet.domain(activeDomainId!),
    standby: fleet.domain(activeDomainId === fleet.east.id ? fleet.west.id : fleet.east.id),
  };
};
const createPromotion = async (target: SimFleetDomain): Promise<Operation> => {
  const { outcome, operation } = await store().operations.create({
    fleetId: fleet.fleetId,
    kind: 'promote',
    targetDomainId: target.id,
    reason: 'test',
    requestedBy: 'test',
  });
  expect(outcome).toBe('created');
  return operation;
};
/** Starts the operation's workflow as the API does (policy read from the store) and waits for it to end. */
const runPromotion = async (target: SimFleetDomain) => {
  const operation = await createPromotion(target);
  expect(await server.orchestrator(taskQueue).startOperation(operation)).toBe('started');
  const handle = server.client.workflow.getHandle(operation.workflowId);
  const outcome = await handle.result().then(
    () => 'completed',
    (err: Error) => err.message,
  );
  return { operation: (await store().operations.get(operation.id))!, handle, outcome };
};
/** Re-applies the fleet's policy with overrides (the workflow reads it when it begins). */
const setPolicy = async (over: Partial<FleetPolicy>) => {
  const { seedLayout } = await import('../../db/testing');
  await seedLayout(store(), { ...fleet.layout, fleet: { ...fleet.layout.fleet, policy: { ...TEST_POLICY, ...over } } });
};
/** The state a standby must be in: every model asleep, training running. */
const expectStandby = async (domain: SimFleetDomain) => {
  const host = await hostState(fleet, domain);
  expect(host.models).toEqual(['asleep']);
  expect(host.training).toEqual(['running']);
  expect(host.trainerPids.length).toBeGreaterThan(0);
};

it('1. promotes the standby: routing flips once, new active serves, old active asleep and training, all steps timed', async () => {
  const before = await routing();
  const { active, standby } = await roles();
  const { operation, handle, outcome } = await runPromotion(standby);
  expect(outcome).toBe('completed');
  expect(await routing()).toEqual({ activeDomainId: standby.id, routeRevision: before.routeRevision + 1 });
  expect(operation).toMatchObject({
    state: 'succeeded',
    routingCommitted: true,
    routeRevision: before.routeRevision + 1,
    error: null,
  });
  const events = await store().events.list(fleet.fleetId, { limit: 1_000 });
  expect(events.filter((e) => e.type === 'routing.committed')).toHaveLength(1);

  expect((await hostState(fleet, standby)).models).toEqual(['awake']);
  expect(await complete(standby.servingUrl)).not.toBe('');
  await expectStandby(active);

  const progress = await handle.query(progressQuery);
  expect(progress.phase).toBe('succeeded');
  expect(progress.steps.map((s) => [s.step, s.status])).toEqual([
    ['stopTraining', 'succeeded'],
    ['verifyGpuReleased', 'succeeded'],
    ['wakeModels', 'succeeded'],
    ['probeModels', 'succeeded'],
    ['commitRouting', 'succeeded'],
    ['demoteOldActive', 'succeeded'],
  ]);
  for (const step of progress.steps) {
    expect(step.attempts).toBeGreaterThanOrEqual(1);
    expect(Date.parse(step.finishedAt!)).toBeGreaterThanOrEqual(Date.parse(step.startedAt!));
  }
  const stepEvents = events.filter((e) => e.operationId === operation.id && e.type === 'operation.step');
  for (const step of [
    'stopTraining',
    'verifyGpuReleased',
    'wakeModels',
    'probeModels',
    'commitRouting',
    'demoteOldActive',
  ]) {
    expect(stepEvents.map((e) => `${e.data.step}:${e.data.status}`)).toEqual(
      expect.arrayContaining([`${step}:started`, `${step}:succeeded`]),
    );
  }
  // Each step records its own progress: up to the commit, one activity per step and nothing else; the operation
  // begins in a local activity (a marker in the history, no activity task).
  const history = (await handle.fetchHistory()).events ?? [];
  const scheduled = history.flatMap((e) => e.activityTaskScheduledEventAttributes?.activityType?.name ?? []);
  const firstScheduled = history.findIndex((e) => e.activityTaskScheduledEventAttributes);
  expect(history.slice(0, firstScheduled).filter((e) => e.markerRecordedEventAttributes)).toHaveLength(1);
  expect(scheduled.slice(0, scheduled.indexOf('commitRouting') + 1)).toEqual([
    'stopTraining',
    'verifyGpuReleased',
    'wakeModels',
    'probeModels',
    'commitRouting',
  ]);
  await replayAndRecord(server.client, handle, 'promotion');
});

describe('2. a failure before commit leaves routing where it was and puts the target back on standby', () => {
  afterEach(async () => {
    const { standby } = await roles();
    await standby.sim.faults.clear();
    setHolding(standby.sim.gpuStateDir, { pid: process.pid, gpuIndex: 0, usedMiB: 0 });
    await setPolicy({});
  });

  const expectFailedAt = async (step: string, code: string | RegExp, run: () => Promise<{ operation: Operation }>) => {
    const before = await routing();
    const { standby } = await roles();
    const { operation } = await run();
    expect(operation.state).toBe('failed');
    expect(operation.error?.step).toBe(step);
    expect(operation.error?.code).toMatch(code);
    expect(operation.routingCommitted).toBe(false);
    expect(await routing()).toEqual(before);
    await expectStandby(standby);
    return operation;
  };

  it('VRAM is never released: fails at verifyGpuReleased', async () => {
    await setPolicy({ verifyGpuTimeoutMs: 2_000 });
    const { standby } = await roles();
    setHolding(standby.sim.gpuStateDir, { pid: process.pid, gpuIndex: 0, usedMiB: 40_000, label: 'stray' });
    const op = await expectFailedAt('verifyGpuReleased', 'Timeout', () => runPromotion(standby));
    expect(op.error?.message).toMatch(/GPU 0: \d+ MiB held besides its vLLM servers/);
  });

  it('wake fails (the engine stays asleep): fails at wakeModels', async () => {
    await setPolicy({ wakeTimeoutMs: 6_000 });
    const { standby } = await roles();
    await standby.sim.faults.set(MODEL, { wakeNoop: true });
    // Either the budget expires mid-attempt (Timeout) or before a retry (the last refusal, NotYet).
    const op = await expectFailedAt('wakeModels', /^(Timeout|NotYet)$/, () => runPromotion(standby));
    expect(op.error?.message).toContain(MODEL);
  });

  it('a model answers empty content after wake: fails at probeModels', async () => {
    const { standby } = await roles();
    await standby.sim.faults.set(MODEL, { emptyContentAfterWake: true });
    const op = await expectFailedAt('probeModels', 'ProbeFailed', () => runPromotion(standby));
    expect(op.error?.message).toContain(`model ${MODEL} failed its probe`);
  });
});

it('5. an abort before commit ends the operation cancelled, routing unchanged, target restored', async () => {
  const before = await routing();
  const { standby } = await roles();
  await standby.sim.faults.set(MODEL, { wakeDelayMs: 8_000 });
  try {
    const operation = await createPromotion(standby);
    await server.orchestrator(taskQueue).startOperation(operation);
    await eventually(
      'the promotion to be waking models',
      async () => (await store().operations.get(operation.id))?.step === 'wakeModels',
      60_000,
    );
    const handle = server.client.workflow.getHandle(operation.workflowId);
    await handle.signal(abortSignal, { reason: 'operator abort' });
    await expect(handle.result()).rejects.toThrow();
    expect(await store().operations.get(operation.id)).toMatchObject({
      state: 'cancelled',
      routingCommitted: false,
      error: { step: 'wakeModels', code: 'Aborted', message: 'operator abort' },
    });
    expect(await routing()).toEqual(before);
    await expectStandby(standby);
    // The wake the abort left in flight on the host ended after compensation's first look: the supervisor held
    // the training start until it ended and refused it beside the now awake engine, and the next round put the
    // engine to sleep and then trained (never a trainer beside an engine waking into its memory).
    const restore = (await store().events.list(fleet.fleetId, { limit: 1_000 })).find(
      (e) => e.type === 'domain.restore' && (e.data as { why?: string }).why?.includes(operation.id),
    );
    expect(restore?.data).toMatchObject({ sleptGpus: [0], trainingStartedGpus: [0], problems: [] });
    expect((await handle.query(progressQuery)).phase).toBe('cancelled');
  } finally {
    await standby.sim.faults.clear();
  }
});

describe('2. (trainer ignores SIGTERM and its grace outlives the step budget)', () => {
  let stubborn: SimFleet;
  let stubbornWorker: Awaited<ReturnType<typeof startTestWorker>>;
  const queue = uniqueTaskQueue('stubborn');
  beforeAll(async () => {
    stubborn = await startSimFleet({ trainerEnv: { HARU_SIM_TRAINER_IGNORE_SIGTERM: '1' }, db: fleet.db });
    stubbornWorker = await startTestWorker(server.connection, stubborn.db.store, queue);
  });
  afterAll(async () => {
    await stubbornWorker?.stop();
    await stubborn?.close();
  });

  it('training does not stop within the budget: fails at stopTraining, training keeps running', async () => {
    const before = (await store().fleets.snapshot(stubborn.fleetId))!;
    const { operation } = await store().operations.create({
      fleetId: stubborn.fleetId,
      kind: 'promote',
      targetDomainId: stubborn.west.id,
      reason: 'test',
      requestedBy: 'test',
    });
    // A grace longer than the step budget is refused in a stored policy; a trainer wedged past its grace
    // (uninterruptible I/O) looks the same to the workflow, so the budget is passed as input here.
    const policy = {
      ...before.policy,
      trainingStopGraceMs: 6_000,
      stopTrainingTimeoutMs: 1_500,
      startTrainingTimeoutMs: 30_000,
    };
    const input: PromotionInput = {
      fleetId: stubborn.fleetId,
      operationId: operation.id,
      targetDomainId: stubborn.west.id,
      policy,
    };
    await expect(
      server.client.workflow.execute(promotionWorkflow, {
        taskQueue: queue,
        workflowId: operation.workflowId,
        args: [input],
      }),
    ).rejects.toThrow();
    const after = (await store().operations.get(operation.id))!;
    expect(after).toMatchObject({
      state: 'failed',
      routingCommitted: false,
      error: { step: 'stopTraining', code: 'Timeout' },
    });
    expect(after.error?.message).toContain('training still running on GPU 0');
    const now = (await store().fleets.snapshot(stubborn.fleetId))!;
    expect([now.activeDomainId, now.routeRevision]).toEqual([before.activeDomainId, before.routeRevision]);
    const host = await hostState(stubborn, stubborn.west);
    expect(host.models).toEqual(['asleep']);
    expect(host.training).toEqual(['running']);
  });
});
