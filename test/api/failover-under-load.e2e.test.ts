/**
 * End to end: API + worker + two simulated domains (real child processes) on the run's Temporal dev
 * server and a fresh Postgres database. OpenAI SDK clients stream and call through the API while the
 * active domain is SIGKILLed; the monitor promotes the standby and every request that arrived during
 * the failover must succeed (held by the proxy, then served by the new active).
 */
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import OpenAI from 'openai';
import { fleetLayoutSchema, type FleetLayoutInput } from '../../schemas/layout';
import { type SimDomain, startSimDomain } from '../../sim/domain';
import { ensureMonitor } from '../../workers/start';
import { createHaruWorker, type HaruWorker } from '../../workers/worker';
import { monitorWorkflowId } from '../../workflows/definitions';
import { twoDomainLayout } from '../support/sim-layout';
import { workflowBundle } from '../workflows/support/bundle';
import { useTestServer } from '../workflows/support/temporal';
import { call, type Harness, startHarness, uniqueSlug } from './support/harness';
import { waitUntil } from './support/wait';

jest.setTimeout(240_000);

const model = 'qwen-sim';

interface Outcome {
  kind: 'stream' | 'json';
  startedAt: number;
  endedAt: number;
  ok: boolean;
  error?: string;
  content?: string;
}

const layoutFor = (stateDir: string): Promise<FleetLayoutInput> =>
  twoDomainLayout({
    slug: uniqueSlug('e2e'),
    model,
    stateDir,
    policy: {
      autoFailover: true,
      heartbeatIntervalMs: 250,
      heartbeatStaleMs: 3_000,
      failureThreshold: 2,
      trainingStopGraceMs: 1_000,
      stopTrainingTimeoutMs: 15_000,
      wakeTimeoutMs: 30_000,
      probeTimeoutMs: 15_000,
      drainTimeoutMs: 5_000,
    },
  });

describe('failover under load', () => {
  let stateDir: string;
  let h: Harness;
  let east: SimDomain | undefined;
  let west: SimDomain | undefined;
  let worker: HaruWorker | undefined;
  let workerRun: Promise<void> | undefined;
  const server = useTestServer(async () => {
    worker?.shutdown();
    await workerRun?.catch(() => {});
    await h?.close();
    await east?.kill().catch(() => {});
    await west?.stop().catch(() => {});
    if (stateDir) rmSync(stateDir, { recursive: true, force: true });
  });

  it('serves every request that arrives while the active domain dies and the standby is promoted', async () => {
    stateDir = mkdtempSync(path.join(os.tmpdir(), 'haru-e2e-'));
    const input = await layoutFor(stateDir);
    const layout = fleetLayoutSchema.parse(input);
    [east, west] = await Promise.all([
      startSimDomain({ layout, domainSlug: 'east', stateDir: path.join(stateDir, 'east'), wakeDelayMs: 300 }),
      startSimDomain({ layout, domainSlug: 'west', stateDir: path.join(stateDir, 'west'), wakeDelayMs: 300 }),
    ]);

    const taskQueue = `e2e-${process.pid}-${Date.now().toString(36)}`;
    h = await startHarness({
      config: { HARU_TASK_QUEUE: taskQueue, HARU_CHAT_HOLD_MS: 120_000, holdPingMs: 1_000 },
    });
    const fleet = await h.seed(input);
    // The monitor owns domain states: start from what it observes, not from the harness's shortcut.
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

    // Standby posture through the API, as an operator (or `haru dev`) does it.
    const demote = await call(`${h.url}/v1/fleets/${fleet.slug}/demote`, { body: { targetDomainId: 'west' } });
    expect(demote.status).toBe(202);
    const demotion = await waitUntil(
      'west to reach standby',
      async () => {
        const op = await call(`${h.url}/v1/fleets/${fleet.slug}/operations/${demote.body.operation.id}`);
        return ['succeeded', 'failed', 'cancelled'].includes(op.body.state) ? op.body : null;
      },
      { timeoutMs: 90_000, intervalMs: 250 },
    );
    expect(demotion.state).toBe('succeeded');
    await waitUntil(
      'the monitor to see west as a viable standby',
      async () => {
        const health = await h.orchestrator.monitorHealth(fleet.id);
        return health?.domains.find((d) => d.slug === 'west')?.isViableStandby;
      },
      { timeoutMs: 60_000, intervalMs: 250 },
    );

    const openai = new OpenAI({
      baseURL: `${h.url}/v1`,
      apiKey: 'unused',
      maxRetries: 0, // the proxy, not the SDK, must carry requests through the failover
      timeout: 180_000,
      defaultHeaders: { 'x-haru-fleet': fleet.slug },
    });
    const outcomes: Outcome[] = [];
    let stop = false;
    const one = async (kind: Outcome['kind']): Promise<void> => {
      const startedAt = Date.now();
      try {
        let content = '';
        if (kind === 'stream') {
          const stream = await openai.chat.completions.create({
            model,
            messages: [{ role: 'user', content: 'hello' }],
            stream: true,
            max_tokens: 8,
          });
          for await (const chunk of stream) content += chunk.choices[0]?.delta.content ?? '';
        } else {
          const answer = await openai.chat.completions.create({
            model,
            messages: [{ role: 'user', content: 'hello' }],
            max_tokens: 8,
          });
          content = answer.choices[0]?.message.content ?? '';
        }
        outcomes.push({ kind, startedAt, endedAt: Date.now(), ok: content.length > 0, content });
      } catch (err) {
        outcomes.push({ kind, startedAt, endedAt: Date.now(), ok: false, error: String(err) });
      }
    };
    const loop = async (kind: Outcome['kind']) => {
      while (!stop) await one(kind);
    };
    const loops = [loop('stream'), loop('json'), loop('stream'), loop('json')];

    let movedAt = 0;
    h.api.cache.onMove(() => {
      movedAt ||= Date.now();
    });
    await waitUntil('traffic before the failure', () => outcomes.filter((o) => o.ok).length >= 8);
    const killAt = Date.now();
    await east.kill();
    // A burst that arrives with the active already dead and the promotion still to come.
    const burstAt = Date.now();
    const burst = Promise.all(
      ['stream', 'json', 'stream', 'json', 'stream', 'json'].map((k) => one(k as Outcome['kind'])),
    );

    await waitUntil(
      'the route to move to west',
      async () => {
        const f = await h.fleet(fleet.slug);
        return f.activeDomainId === fleet.domains.find((d) => d.slug === 'west')!.id;
      },
      { timeoutMs: 120_000, intervalMs: 100 },
    );
    await burst;
    await waitUntil('traffic after the move', () => outcomes.filter((o) => o.startedAt > movedAt && o.ok).length >= 8, {
      timeoutMs: 60_000,
    });
    stop = true;
    await Promise.all(loops);

    // Every request that arrived after the active died succeeded: the burst, the loops, held or not.
    const arrivedDuringFailover = outcomes.filter((o) => o.startedAt >= killAt);
    expect(arrivedDuringFailover.filter((o) => !o.ok)).toEqual([]);
    // The burst really arrived during the failover (before the route moved) and was held through it.
    expect(movedAt).toBeGreaterThan(burstAt);
    const heldThrough = outcomes.filter((o) => o.startedAt >= burstAt && o.startedAt < movedAt);
    expect(heldThrough.filter((o) => o.kind === 'stream').length).toBeGreaterThanOrEqual(3);
    expect(heldThrough.filter((o) => o.kind === 'json').length).toBeGreaterThanOrEqual(3);
    expect(heldThrough.every((o) => o.ok && o.endedAt >= movedAt)).toBe(true);

    // A non-streaming request in flight when the host died had received no byte: it was carried over too.
    const jsonInFlightAtKill = outcomes.filter((o) => o.kind === 'json' && o.startedAt < killAt && o.endedAt > killAt);
    expect(jsonInFlightAtKill.filter((o) => !o.ok)).toEqual([]);

    // The monitor's automatic promotion moved the pointer (its best-effort demotion of the dead east may still run).
    const promotions = (await h.store.operations.list(fleet.id)).filter((o) => o.kind === 'promote');
    expect(promotions).toHaveLength(1);
    expect(promotions[0]).toMatchObject({ requestedBy: expect.any(String), routingCommitted: true });
    // The API shows the workflow's live progress for it: null while the query goes unanswered (a busy
    // worker), and the commit's step may still read running after the pointer moved, so wait for it.
    await waitUntil(
      'the API to show the promotion commit step succeeded',
      async () => {
        const detail = await call(`${h.url}/v1/fleets/${fleet.slug}/operations/${promotions[0]!.id}`);
        expect(detail.status).toBe(200);
        const steps = (detail.body.progress?.steps ?? []) as { step: string; status: string }[];
        return steps.find((s) => s.step === 'commitRouting')?.status === 'succeeded';
      },
      { timeoutMs: 30_000, intervalMs: 250 },
    );
    await server.client.workflow.getHandle(monitorWorkflowId(fleet.id)).terminate('test done');
  });
});
