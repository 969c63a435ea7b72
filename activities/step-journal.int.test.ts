import { ApplicationFailure } from '@temporalio/common';
import { testLayout } from '../db/fixtures';
import { createTestDatabase, seedLayout, type TestDatabase } from '../db/testing';
import { FailureType } from '../schemas/failures';
import { createFleetStoreActivities } from './fleet-store';
import { quietEnvironment, runIn } from '../test/support/activity-environment';
import { FakeHost } from '../test/support/fake-host';
import { withJournal } from './step-journal';

let tdb: TestDatabase;
let recordStep: ReturnType<typeof createFleetStoreActivities>['recordStep'];

beforeAll(async () => {
  tdb = await createTestDatabase();
  recordStep = createFleetStoreActivities({
    store: tdb.store,
    supervisor: new FakeHost().client,
    now: () => new Date(),
  }).recordStep;
});
afterAll(() => tdb?.drop());

let fleetSlug = 0;
/** A running promotion of the standby of a fresh fleet. */
async function runningPromotion() {
  const report = await seedLayout(tdb.store, testLayout({ fleet: `j${++fleetSlug}` }));
  const snapshot = (await tdb.store.fleets.snapshot(report.fleetId))!;
  const west = snapshot.domains[1]!;
  const { operation } = await tdb.store.operations.create({
    fleetId: snapshot.id,
    kind: 'promote',
    targetDomainId: west.id,
    reason: 'test',
    requestedBy: 'test',
  });
  await tdb.store.operations.start(operation.id);
  const journal = { fleetId: snapshot.id, operationId: operation.id, domainId: west.id, step: 'wakeModels' };
  return { fleetId: snapshot.id, operation, journal };
}

/** A step activity that notes each run and what the operation's current step was when it ran. */
function wakeStep(ran: (string | null)[], record: typeof recordStep = recordStep) {
  return withJournal(
    record,
    (r: { attempt: number; models: string[] }) => `models awake: ${r.models.join(', ')}`,
    async (input: { operationId: string }) => {
      ran.push((await tdb.store.operations.get(input.operationId))?.step ?? null);
      return { attempt: 1, models: ['llama'] };
    },
  );
}

const stepEvents = async (fleetId: string) =>
  (await tdb.store.events.list(fleetId))
    .filter((e) => e.type === 'operation.step')
    .map((e) => ({ message: e.message, data: e.data }));

it('records started before the work and succeeded with the description after it, in one activity', async () => {
  const { fleetId, operation, journal } = await runningPromotion();
  const ran: (string | null)[] = [];
  const result = await runIn(quietEnvironment({ attempt: 1 }), wakeStep(ran), {
    operationId: operation.id,
    journal,
  });
  expect(result).toEqual({ attempt: 1, models: ['llama'] });
  expect(ran).toEqual(['wakeModels']); // the operation's current step was set before the work ran
  expect(await stepEvents(fleetId)).toEqual([
    { message: 'wakeModels started', data: { step: 'wakeModels', status: 'started' } },
    {
      message: 'models awake: llama',
      data: { step: 'wakeModels', status: 'succeeded', attempt: 1, durationMs: expect.any(Number) },
    },
  ]);
});

it('on a retried attempt names the step on the operation row again but writes no second started event', async () => {
  const { fleetId, operation, journal } = await runningPromotion();
  await tdb.store.operations.setStep(operation.id, 'verifyGpuReleased');
  const ran: (string | null)[] = [];
  await runIn(quietEnvironment({ attempt: 3 }), wakeStep(ran), { operationId: operation.id, journal });
  expect(ran).toEqual(['wakeModels']);
  expect((await stepEvents(fleetId)).map((e) => e.data.status)).toEqual(['succeeded']);
});

it('does no work when the operation is no longer in flight', async () => {
  const { fleetId, operation, journal } = await runningPromotion();
  await tdb.store.operations.cancel(operation.id, { step: 'x', code: 'Aborted', message: 'stop' });
  const ran: (string | null)[] = [];
  const err = await runIn(quietEnvironment({ attempt: 1 }), wakeStep(ran), {
    operationId: operation.id,
    journal,
  }).catch((e: unknown) => e);
  expect(err).toBeInstanceOf(ApplicationFailure);
  expect(err).toMatchObject({ type: FailureType.OperationClosed, nonRetryable: true });
  expect(ran).toEqual([]);
  expect(await stepEvents(fleetId)).toEqual([]);
});

it('records nothing without a journal (a step run outside an operation plan)', async () => {
  const { fleetId, operation } = await runningPromotion();
  const ran: (string | null)[] = [];
  await runIn(quietEnvironment({ attempt: 1 }), wakeStep(ran), { operationId: operation.id });
  expect(ran).toEqual([null]);
  expect(await stepEvents(fleetId)).toEqual([]);
});

it('returns the result of a step whose effect is done even when its succeeded event cannot be written', async () => {
  const { fleetId, operation, journal } = await runningPromotion();
  const failingSucceeded: typeof recordStep = async (input) => {
    if (input.status === 'succeeded') throw new Error('connection terminated');
    return recordStep(input);
  };
  const ran: (string | null)[] = [];
  const step = wakeStep(ran, failingSucceeded);
  const result = await runIn(quietEnvironment({ attempt: 1 }), step, { operationId: operation.id, journal });
  expect(result).toEqual({ attempt: 1, models: ['llama'] });
  expect(ran).toEqual(['wakeModels']);
  expect((await stepEvents(fleetId)).map((e) => e.data.status)).toEqual(['started']);
});
