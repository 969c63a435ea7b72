/**
 * The fleet monitor failing over by itself: a simulated active host is SIGKILLed and the monitor, on the
 * real worker and dev server, fails it and promotes the standby. Also driven through the `temporal` CLI.
 */
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { findTemporalCli, TEMPORAL_MISSING_MESSAGE } from '../../cli/temporal-cli';
import type { OperationProgress } from '../../schemas/api';
import { ensureMonitor } from '../../workers/start';
import { demotionChildWorkflowId, healthQuery, monitorWorkflowId, progressQuery } from '../../workflows/definitions';
import { complete, type SimFleet, startSimFleet } from './support/sim-fleet';
import { eventually, uniqueTaskQueue, useTestServer } from './support/temporal';
import { replayAndRecord, startTestWorker } from './support/worker';

jest.setTimeout(180_000);
const run = promisify(execFile);

const server = useTestServer();

/** A fleet with a worker and its monitor; `close` stops them all. */
async function monitoredFleet() {
  const fleet = await startSimFleet();
  const taskQueue = uniqueTaskQueue('failover');
  const worker = await startTestWorker(server.connection, fleet.db.store, taskQueue);
  await ensureMonitor(server.client, fleet.fleetId, taskQueue, fleet.layout.fleet.slug);
  const monitor = server.client.workflow.getHandle(monitorWorkflowId(fleet.fleetId));
  await eventually(
    'the monitor to look at the fleet',
    async () => (await monitor.query(healthQuery))?.standbyRanking.length === 1,
  );
  return {
    fleet,
    monitor,
    async close() {
      await monitor.terminate('test over').catch(() => undefined);
      await worker.stop();
      await fleet.close();
    },
  };
}

const activeOf = async (fleet: SimFleet) => (await fleet.db.store.fleets.snapshot(fleet.fleetId))!.activeDomainId;

it('4. kills the active host; the monitor fails it and promotes the standby with no human action', async () => {
  const { fleet, monitor, close } = await monitoredFleet();
  try {
    const killedAt = Date.now();
    await fleet.east.sim.kill();
    await eventually(
      'routing to move to the standby',
      async () => (await activeOf(fleet)) === fleet.west.id,
      90_000,
      20,
    );
    const elapsedMs = Date.now() - killedAt;
    console.log(`auto-failover: active host killed -> routing committed to the standby in ${elapsedMs} ms`);

    expect(await complete(fleet.west.servingUrl)).not.toBe('');
    const [operation] = await fleet.db.store.operations.list(fleet.fleetId);
    expect(operation).toMatchObject({
      kind: 'promote',
      targetDomainId: fleet.west.id,
      requestedBy: 'monitor',
      routingCommitted: true,
    });
    expect(operation!.reason).toMatch(/^auto-failover: active domain east /);
    expect((await fleet.db.store.domains.get(fleet.east.id))?.state).toBe('failed');

    const promotion = server.client.workflow.getHandle(operation!.workflowId);
    // The old host is dead: its demotion completes saying so, and the promotion records the step failed.
    expect(await promotion.result()).toMatchObject({ state: 'succeeded', demotion: 'unreachable' });
    expect((await fleet.db.store.operations.get(operation!.id))?.state).toBe('succeeded');
    const demotion = server.client.workflow.getHandle(demotionChildWorkflowId(fleet.fleetId, operation!.id));
    expect((await demotion.describe()).status.name).toBe('COMPLETED');
    expect(await demotion.result()).toMatchObject({ domainId: fleet.east.id, state: 'unreachable', drained: null });
    // The Web UI's rows read: what each workflow does, from where to where and why; the dead host's demotion
    // says on its page that it demoted nothing.
    const fleetSlug = fleet.layout.fleet.slug;
    expect(await (await promotion.describe()).staticSummary()).toMatch(
      new RegExp(`^promote ${fleetSlug}: east → west \\(monitor: auto-failover: active domain east `),
    );
    expect(await (await demotion.describe()).staticSummary()).toMatch(
      new RegExp(`^demote ${fleetSlug}/east, the old active`),
    );
    const metadata = await demotion.query<{ currentDetails?: string }>('__temporal_workflow_metadata');
    expect(metadata.currentDetails).toMatch(/^\*\*Not demoted\*\*: the host did not answer/);
    const progress = await promotion.query(progressQuery);
    expect(progress.steps.find((s) => s.step === 'demoteOldActive')).toMatchObject({
      status: 'failed',
      lastError: expect.stringMatching(/^SupervisorUnreachable: old active unreachable, left as it was/),
    });

    // An operator finds them by the slugs; the ids stay the business keys.
    const slug = fleet.layout.fleet.slug;
    const found = await eventually(
      'the visibility store to list the fleet by slug',
      async () => {
        const ids: string[] = [];
        for await (const w of server.client.workflow.list({ query: `HaruFleetSlug = '${slug}'` }))
          ids.push(w.workflowId);
        return ids.length >= 3 ? ids.sort() : null;
      },
      30_000,
    );
    expect(found).toEqual(
      [
        monitorWorkflowId(fleet.fleetId),
        operation!.workflowId,
        demotionChildWorkflowId(fleet.fleetId, operation!.id),
      ].sort(),
    );
    const eastDemotions: string[] = [];
    for await (const w of server.client.workflow.list({
      query: `HaruFleetSlug = '${slug}' AND HaruDomainSlug = 'east'`,
    }))
      eastDemotions.push(w.workflowId);
    expect(eastDemotions).toEqual([demotionChildWorkflowId(fleet.fleetId, operation!.id)]);
    await replayAndRecord(server.client, promotion, 'auto-failover-promotion');
    await replayAndRecord(server.client, monitor, 'fleet-monitor');
  } finally {
    await close();
  }
});

describe('6. through the temporal CLI', () => {
  const cli = findTemporalCli(process.env.TEMPORAL_CLI);
  const temporal = async (...args: string[]) => {
    if (!cli) throw new Error(TEMPORAL_MISSING_MESSAGE);
    const { stdout } = await run(
      cli,
      [...args, '--address', process.env.TEMPORAL_TEST_ADDRESS!, '--namespace', 'default'],
      {
        timeout: 60_000,
      },
    );
    return stdout;
  };

  it('pauseAutoFailover holds the promotion after a kill, resumeAutoFailover lets it run, progress is queryable', async () => {
    const { fleet, monitor, close } = await monitoredFleet();
    const monitorId = monitorWorkflowId(fleet.fleetId);
    try {
      await temporal('workflow', 'signal', '--workflow-id', monitorId, '--name', 'pauseAutoFailover');
      await eventually(
        'the pause to take effect',
        async () => (await monitor.query(healthQuery))?.isAutoFailoverPaused,
      );

      await fleet.east.sim.kill();
      const blocked = await eventually(
        'the monitor to fail the active but hold the promotion',
        async () => {
          const health = await monitor.query(healthQuery);
          return health?.failoverBlockedBy === 'paused' &&
            (await fleet.db.store.domains.get(fleet.east.id))?.state === 'failed'
            ? health
            : null;
        },
        90_000,
      );
      // One more full look after the decision, still paused: nothing was asked for.
      await temporal('workflow', 'signal', '--workflow-id', monitorId, '--name', 'checkNow');
      await eventually('a fresh look', async () => (await monitor.query(healthQuery))!.checkedAt > blocked.checkedAt);
      expect(await fleet.db.store.operations.list(fleet.fleetId)).toEqual([]);
      expect(await activeOf(fleet)).toBe(fleet.east.id);

      await temporal('workflow', 'signal', '--workflow-id', monitorId, '--name', 'resumeAutoFailover');
      await eventually('routing to move to the standby', async () => (await activeOf(fleet)) === fleet.west.id, 90_000);

      const [operation] = await fleet.db.store.operations.list(fleet.fleetId);
      // Routing moves in the store before the workflow has taken in the commit's result: wait for the step.
      const progress = await eventually(
        'the promotion to report its commit through the CLI',
        async () => {
          const out = await temporal(
            'workflow',
            'query',
            '--workflow-id',
            operation!.workflowId,
            '--name',
            'progress',
            '--output',
            'json',
          );
          const [answer] = (JSON.parse(out) as { queryResult: [OperationProgress] }).queryResult;
          return answer.steps.find((s) => s.step === 'commitRouting')?.status === 'succeeded' ? answer : null;
        },
        60_000,
        250,
      );
      expect(progress.steps.map((s) => s.step)).toEqual([
        'stopTraining',
        'verifyGpuReleased',
        'wakeModels',
        'probeModels',
        'commitRouting',
        'demoteOldActive',
      ]);
    } finally {
      await close();
    }
  });
});
