/**
 * End to end, real processes: API + worker + two simulated domains (supervisor and fake vLLM as child
 * processes) on the run's Temporal dev server and a fresh Postgres database. An active whose vLLM admin
 * endpoints answer in 2-4 s (the event-loop lag of a loaded vLLM) while traffic flows is not failed over;
 * the same active SIGKILLed is. A shortened policy (250 ms polls, threshold 3) keeps it under a minute.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import OpenAI from 'openai';
import { fleetLayoutSchema } from '../../schemas/layout';
import { supervisorStatusSchema } from '../../schemas/supervisor';
import { type SimDomain, startSimDomain } from '../../sim/domain';
import { ensureMonitor } from '../../workers/start';
import { createHaruWorker, type HaruWorker } from '../../workers/worker';
import { monitorWorkflowId } from '../../workflows/definitions';
import { twoDomainLayout } from '../support/sim-layout';
import { workflowBundle } from '../workflows/support/bundle';
import { useTestServer } from '../workflows/support/temporal';
import { type Harness, startHarness, uniqueSlug } from './support/harness';
import { waitUntil } from './support/wait';

jest.setTimeout(120_000);

const model = 'qwen-sim';
/** How long the busy active must keep its heartbeat: many times `failureThreshold` polls of 250 ms. */
const BUSY_WATCH_MS = 6_000;

const layoutFor = (stateDir: string) =>
  twoDomainLayout({
    slug: uniqueSlug('busy'),
    model,
    stateDir,
    policy: {
      autoFailover: true,
      heartbeatIntervalMs: 250,
      heartbeatStaleMs: 3_000,
      failureThreshold: 3,
      trainingStopGraceMs: 1_000,
      stopTrainingTimeoutMs: 15_000,
      wakeTimeoutMs: 30_000,
      probeTimeoutMs: 15_000,
      drainTimeoutMs: 5_000,
    },
  });

describe('a busy active is not failed over; a killed one is', () => {
  let stateDir: string;
  let h: Harness;
  let east: SimDomain | undefined;
  let west: SimDomain | undefined;
  let worker: HaruWorker | undefined;
  let workerRun: Promise<void> | undefined;
  let stop = false;
  const server = useTestServer(async () => {
    stop = true;
    worker?.shutdown();
    await workerRun?.catch(() => {});
    await h?.close();
    await east?.kill().catch(() => {});
    await west?.stop().catch(() => {});
    if (stateDir) rmSync(stateDir, { recursive: true, force: true });
  });

  it('keeps routing on an active with slow admin endpoints under traffic, and fails over when it is killed', async () => {
    stateDir = mkdtempSync(path.join(os.tmpdir(), 'haru-busy-'));
    const input = await layoutFor(stateDir);
    const layout = fleetLayoutSchema.parse(input);
    [east, west] = await Promise.all([
      startSimDomain({ layout, domainSlug: 'east', stateDir: path.join(stateDir, 'east'), tokensPerSecond: 400 }),
      startSimDomain({
        layout,
        domainSlug: 'west',
        stateDir: path.join(stateDir, 'west'),
        wakeDelayMs: 300,
        role: 'standby',
      }),
    ]);
    const taskQueue = `busy-${process.pid}-${Date.now().toString(36)}`;
    h = await startHarness({ config: { HARU_TASK_QUEUE: taskQueue, HARU_CHAT_HOLD_MS: 60_000 } });
    const fleet = await h.seed(input);
    const eastId = fleet.domains.find((d) => d.slug === 'east')!.id;
    const westId = fleet.domains.find((d) => d.slug === 'west')!.id;
    worker = await createHaruWorker({
      connection: server.connection,
      namespace: 'default',
      taskQueue,
      store: h.db.store,
      workflowBundle: workflowBundle(),
      pollIntervalMs: 100,
    });
    workerRun = worker.run();
    await ensureMonitor(server.client, fleet.id, taskQueue);
    await waitUntil(
      'the monitor to see west as a viable standby',
      async () =>
        (await h.orchestrator.monitorHealth(fleet.id))?.domains.find((d) => d.slug === 'west')?.isViableStandby,
      { timeoutMs: 60_000, intervalMs: 250 },
    );

    const openai = new OpenAI({
      baseURL: `${h.url}/v1`,
      apiKey: 'unused',
      maxRetries: 0,
      timeout: 60_000,
      defaultHeaders: { 'x-haru-fleet': fleet.slug },
    });
    let served = 0;
    const loop = async () => {
      while (!stop) {
        const answer = await openai.chat.completions
          .create({ model, messages: [{ role: 'user', content: 'hello' }], max_tokens: 16 })
          .catch(() => null);
        if (answer?.choices[0]?.message.content) served += 1;
      }
    };
    const loops = [loop(), loop(), loop()];
    await waitUntil('traffic through the active', () => served >= 3);

    // vLLM's admin endpoints (is_sleeping, metrics, health) now answer in 2-4 s, as under heavy load.
    await east.faults.set(model, { adminLagMs: 2_000, adminLagMaxMs: 4_000, tokensPerSecond: 400 });
    const statusOfEast = async () => {
      const res = await fetch(`${east!.supervisorUrl}/v1/status`);
      return supervisorStatusSchema.parse(await res.json()).models[0]!;
    };
    await waitUntil(
      'the supervisor to report the model busy',
      async () => (await statusOfEast()).condition === 'busy',
      {
        timeoutMs: 30_000,
        intervalMs: 100,
      },
    );
    const busySince = Date.now();
    const servedBefore = served;
    await waitUntil(
      `the monitor to keep the busy active alive for ${BUSY_WATCH_MS} ms`,
      async () => {
        const row = (await h.store.domains.get(eastId))!;
        return row.lastSeenAt !== null && Date.parse(row.lastSeenAt) >= busySince + BUSY_WATCH_MS;
      },
      { timeoutMs: 30_000, intervalMs: 250 },
    );
    // Alive all along: a read slower than the refresh is `busy`, one that came in between is `ready`; never
    // `gone` or `frozen` (which would fail the poll).
    expect(['busy', 'ready']).toContain((await statusOfEast()).condition);
    expect(served).toBeGreaterThan(servedBefore); // traffic kept flowing
    expect((await h.fleet(fleet.slug)).activeDomainId).toBe(eastId);
    expect((await h.store.operations.list(fleet.id)).filter((o) => o.kind === 'promote')).toEqual([]);
    expect((await h.store.domains.get(eastId))!.state).not.toBe('failed');

    // The same active, SIGKILLed: the monitor fails it over.
    const killAt = Date.now();
    await east.kill();
    await waitUntil('the route to move to west', async () => (await h.fleet(fleet.slug)).activeDomainId === westId, {
      timeoutMs: 60_000,
      intervalMs: 100,
    });
    stop = true;
    await Promise.all(loops);
    const promotions = (await h.store.operations.list(fleet.id)).filter((o) => o.kind === 'promote');
    expect(promotions).toHaveLength(1);
    expect(promotions[0]!.createdAt >= new Date(killAt).toISOString()).toBe(true);
    await server.client.workflow.getHandle(monitorWorkflowId(fleet.id)).terminate('test done');
  });
});
