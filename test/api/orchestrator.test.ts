/** The API's orchestrator against the run's dev server: how an operation's workflow is started. */
import { testLayout } from '../../db/fixtures';
import { createTestDatabase, seedLayout, type TestDatabase } from '../../db/testing';
import { uniqueTaskQueue, useTestServer } from '../workflows/support/temporal';

let db: TestDatabase;
const started: string[] = [];
const server = useTestServer(async () => {
  for (const id of started)
    await server.client.workflow
      .getHandle(id)
      .terminate('test over')
      .catch(() => undefined);
  await db?.drop();
});

beforeAll(async () => {
  db = await createTestDatabase();
});

it('starts an operation workflow under its business id once; a repeat says already_started', async () => {
  const taskQueue = uniqueTaskQueue('op-start');
  const orchestrator = server.orchestrator(taskQueue);
  const report = await seedLayout(db.store, testLayout({ fleet: 'op-start' }));
  const west = (await db.store.fleets.snapshot(report.fleetId))!.domains[1]!;
  const { operation } = await db.store.operations.create({
    fleetId: report.fleetId,
    kind: 'promote',
    targetDomainId: west.id,
    reason: 'test',
    requestedBy: 'test',
  });
  started.push(operation.workflowId);
  expect(operation.workflowId).toBe(`haru/${report.fleetId}/op/${operation.id}`);
  expect(await orchestrator.startOperation(operation, { fleet: 'op-start', domain: west.slug })).toBe('started');
  expect(await orchestrator.startOperation(operation)).toBe('already_started');
  const described = await server.client.workflow.getHandle(operation.workflowId).describe();
  expect(described.type).toBe('promotionWorkflow');
  expect(described.taskQueue).toBe(taskQueue);
  expect(Object.fromEntries(described.typedSearchAttributes.getAll().map((p) => [p.key.name, p.value]))).toEqual({
    HaruFleet: report.fleetId,
    HaruFleetSlug: 'op-start',
    HaruDomain: west.id,
    HaruDomainSlug: west.slug,
    HaruOperation: 'promote',
  });
  expect(await described.memo).toEqual({ reason: 'test', requestedBy: 'test' });
});
