/**
 * The worker's start-up helpers against the real dev server: search attributes, monitors, and the counters its
 * metrics write at 0 before anything counts.
 */
import { randomUUID } from 'node:crypto';
import { msToTs } from '@temporalio/common/lib/time';
import { createTestDatabase, seedLayout, type TestDatabase } from '../../db/testing';
import { testLayout } from '../../db/fixtures';
import { HARU_SEARCH_ATTRIBUTES } from '../../cli/temporal-dev-server';
import { ensureSearchAttributes } from '../../workers/search-attributes';
import { ensureMonitor, ensureMonitors } from '../../workers/start';
import { createWorkerMetrics } from '../../workers/metrics';
import { parsePrometheusText, sumSamples } from '../../supervisor/prometheus-text';
import { startTestWorker } from './support/worker';
import { monitorWorkflowId } from '../../workflows/definitions';
import { eventually, uniqueTaskQueue, useTestServer } from './support/temporal';

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

it('registers the five search attributes on a namespace that lacks them, and nothing the second time', async () => {
  const namespace = `haru-sa-${randomUUID().slice(0, 8)}`;
  await server.connection.workflowService.registerNamespace({
    namespace,
    workflowExecutionRetentionPeriod: msToTs('1 day'),
  });
  const added = await eventually(
    'the new namespace to accept operator calls',
    () => ensureSearchAttributes(server.connection, namespace),
    60_000,
    500,
  );
  expect(added.sort()).toEqual(['HaruDomain', 'HaruDomainSlug', 'HaruFleet', 'HaruFleetSlug', 'HaruOperation']);
  // The dev server pre-registers the same set (cli/temporal-dev-server.ts).
  expect(Object.keys(HARU_SEARCH_ATTRIBUTES).sort()).toEqual(added.sort());
  const { customAttributes } = await server.connection.operatorService.listSearchAttributes({ namespace });
  expect(Object.keys(customAttributes ?? {})).toEqual(
    expect.arrayContaining(['HaruFleet', 'HaruDomain', 'HaruOperation']),
  );
  expect(await ensureSearchAttributes(server.connection, namespace)).toEqual([]);
});

it('starts one monitor per fleet however often it is asked', async () => {
  const taskQueue = uniqueTaskQueue('ensure');
  const report = await seedLayout(db.store, testLayout({ fleet: 'ensure-a' }));
  await seedLayout(db.store, testLayout({ fleet: 'ensure-b' }));
  const fleetIds = await ensureMonitors(server.client, db.store, taskQueue);
  started.push(...fleetIds.map(monitorWorkflowId));
  expect(fleetIds).toHaveLength(2);
  const first = await server.client.workflow.getHandle(monitorWorkflowId(report.fleetId)).describe();
  await ensureMonitor(server.client, report.fleetId, taskQueue);
  const second = await server.client.workflow.getHandle(monitorWorkflowId(report.fleetId)).describe();
  expect(second.runId).toBe(first.runId);
  expect(Object.fromEntries(first.typedSearchAttributes.getAll().map((p) => [p.key.name, p.value]))).toEqual({
    HaruFleet: report.fleetId,
    HaruFleetSlug: 'ensure-a',
  });
});

it('writes the counters the alerts read at 0 for every fleet in the store, before anything counts', async () => {
  await seedLayout(db.store, testLayout({ fleet: 'counted', domains: ['north', 'south'] }));
  const metrics = createWorkerMetrics();
  const worker = await startTestWorker(server.connection, db.store, uniqueTaskQueue('metrics'), { metrics });
  await worker.stop();
  const text = await metrics.registry.metrics();
  // HaruFailoverFailed and HaruGpuMemoryNotReleased: a first failure must be an increase from 0.
  expect(text).toContain('haru_operations_total{fleet="counted",kind="promote",outcome="failed"} 0\n');
  expect(text).toContain('haru_worker_activity_executions_total{activity="verifyGpuReleased",outcome="failed"} 0\n');
  const samples = parsePrometheusText(text);
  expect(sumSamples(samples, 'haru_worker_routing_commits_total', { fleet: 'counted', outcome: 'committed' })).toBe(0);
  expect(
    sumSamples(samples, 'haru_worker_domain_polls_total', { fleet: 'counted', domain: 'south', outcome: 'error' }),
  ).toBe(0);
});

it('runs one warm-up workflow on its operations queue as it starts, so a promotion is never its first workflow task there', async () => {
  const count = async (taskQueue: string) => {
    const ids: string[] = [];
    const query = `WorkflowType = 'workerWarmUpWorkflow' AND TaskQueue = '${taskQueue}' AND ExecutionStatus = 'Completed'`;
    for await (const w of server.client.workflow.list({ query })) ids.push(w.workflowId);
    return ids;
  };
  const operations = uniqueTaskQueue('warm');
  const worker = await startTestWorker(server.connection, db.store, operations);
  try {
    const ids = await eventually('the warm-up to complete', async () => {
      const found = await count(operations);
      if (found.length === 0) throw new Error('no completed warm-up yet');
      return found;
    });
    expect(ids).toHaveLength(1);
    expect(ids[0]).toMatch(/^haru\/worker\/.+\/warm-up$/);
  } finally {
    await worker.stop();
  }
  // A worker serving only the monitors' queue has no operations queue to warm.
  const monitorsOnly = uniqueTaskQueue('warm-monitors');
  const other = await startTestWorker(server.connection, db.store, monitorsOnly, { queues: 'monitors' });
  await other.stop();
  expect(await count(monitorsOnly)).toEqual([]);
});
