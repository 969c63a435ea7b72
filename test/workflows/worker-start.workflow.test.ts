/** The worker's start-up helpers against the real dev server: search attributes, monitors, operation starts. */
import { randomUUID } from 'node:crypto';
import type { Client } from '@temporalio/client';
import { msToTs } from '@temporalio/common/lib/time';
import type { NativeConnection } from '@temporalio/worker';
import { createTestDatabase, seedLayout, type TestDatabase } from '../../db/testing';
import { testLayout } from '../../db/fixtures';
import { ensureSearchAttributes } from '../../workers/search-attributes';
import { ensureMonitor, ensureMonitors, startOperationWorkflow } from '../../workers/start';
import { monitorWorkflowId } from '../../workflows/definitions';
import { connectTestServer, eventually, uniqueTaskQueue } from './support/temporal';

let connection: NativeConnection;
let client: Client;
let db: TestDatabase;
const started: string[] = [];

beforeAll(async () => {
  ({ connection, client } = await connectTestServer());
  db = await createTestDatabase();
});
afterAll(async () => {
  for (const id of started)
    await client.workflow
      .getHandle(id)
      .terminate('test over')
      .catch(() => undefined);
  await db?.drop();
  await connection?.close();
});

it('registers the three search attributes on a namespace that lacks them, and nothing the second time', async () => {
  const namespace = `haru-sa-${randomUUID().slice(0, 8)}`;
  await connection.workflowService.registerNamespace({
    namespace,
    workflowExecutionRetentionPeriod: msToTs('1 day'),
  });
  const added = await eventually(
    'the new namespace to accept operator calls',
    () => ensureSearchAttributes(connection, namespace),
    60_000,
    500,
  );
  expect(added.sort()).toEqual(['HaruDomain', 'HaruFleet', 'HaruOperation']);
  const { customAttributes } = await connection.operatorService.listSearchAttributes({ namespace });
  expect(Object.keys(customAttributes ?? {})).toEqual(
    expect.arrayContaining(['HaruFleet', 'HaruDomain', 'HaruOperation']),
  );
  expect(await ensureSearchAttributes(connection, namespace)).toEqual([]);
});

it('starts one monitor per fleet however often it is asked', async () => {
  const taskQueue = uniqueTaskQueue('ensure');
  const report = await seedLayout(db.store, testLayout({ fleet: 'ensure-a' }));
  await seedLayout(db.store, testLayout({ fleet: 'ensure-b' }));
  const fleetIds = await ensureMonitors(client, db.store, taskQueue);
  started.push(...fleetIds.map(monitorWorkflowId));
  expect(fleetIds).toHaveLength(2);
  const first = await client.workflow.getHandle(monitorWorkflowId(report.fleetId)).describe();
  await ensureMonitor(client, report.fleetId, taskQueue);
  const second = await client.workflow.getHandle(monitorWorkflowId(report.fleetId)).describe();
  expect(second.runId).toBe(first.runId);
  expect(first.typedSearchAttributes.getAll().map((p) => [p.key.name, p.value])).toEqual([
    ['HaruFleet', report.fleetId],
  ]);
});

it('starts an operation workflow under its business id once; a repeat says already_started', async () => {
  const taskQueue = uniqueTaskQueue('op-start');
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
  expect(await startOperationWorkflow(client, operation, taskQueue)).toBe('started');
  expect(await startOperationWorkflow(client, operation, taskQueue)).toBe('already_started');
  const described = await client.workflow.getHandle(operation.workflowId).describe();
  expect(described.type).toBe('promotionWorkflow');
  expect(Object.fromEntries(described.typedSearchAttributes.getAll().map((p) => [p.key.name, p.value]))).toEqual({
    HaruFleet: report.fleetId,
    HaruDomain: west.id,
    HaruOperation: 'promote',
  });
  expect(await described.memo).toEqual({ reason: 'test', requestedBy: 'test' });
});
