/**
 * Failover benchmark: two simulated domains (real processes), Haru's API and worker with production
 * defaults, a steady OpenAI SDK load (streaming and not) through the proxy; the active domain is SIGKILLed
 * and the monitor promotes the standby. Repeated `--runs` times; prints medians and writes JSON.
 *
 *   npm run bench:failover -- [--runs 5] [--wake-delay-ms 2000] [--models 1] [--concurrency 4]
 *
 * Figures per run: detection (kill -> the monitor's promote decision), each promotion step, kill -> commit,
 * kill -> first answer from the new active, client-visible errors, the requests in flight at the kill and how
 * each ended (completed with the uninterrupted text, completed otherwise, failed), the API's migration
 * counters, extra latency of held requests, and the orchestration overhead: decision -> commit minus the simulator's own delays (trainer exit, wake, probe).
 */
import { execFile } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { parseArgs, promisify } from 'node:util';
import type { Client } from '@temporalio/client';
import OpenAI from 'openai';
import { createTestDatabase } from '../db/testing';
import { seedLayout } from '../db/testing';
import { fleetLayoutSchema } from '../schemas/layout';
import { SIM_NVIDIA_SMI, SIM_TRAINER, type SimDomain, startSimDomain } from '../sim/domain';
import { NVIDIA_APPS_QUERY, NVIDIA_GPU_QUERY } from '../supervisor/gpu/nvidia';
import { freePort } from '../test/support/ports';
import { healthQuery, monitorWorkflowId, progressQuery } from '../workflows/definitions';
import { historyBreakdown, printTimeline, type Breakdown } from './support/history';
import { printTable, writeResult } from './support/report';
import { startHaruProcess } from './support/processes';
import { startBenchStack } from './support/stack';
import { eventually } from '../test/support/eventually';
import { fmt, max, median, percentile } from './support/stats';

const { values: args } = parseArgs({
  options: {
    runs: { type: 'string', default: '5' },
    'wake-delay-ms': { type: 'string', default: '2000' },
    models: { type: 'string', default: '1' },
    concurrency: { type: 'string', default: '4' },
    'max-tokens': { type: 'string', default: '16' },
    timeline: { type: 'boolean', default: false },
  },
});
const execFileAsync = promisify(execFile);
const RUNS = Number(args.runs);
const WAKE_DELAY_MS = Number(args['wake-delay-ms']);
const MODELS = Number(args.models);
const CONCURRENCY = Number(args.concurrency);
const MAX_TOKENS = Number(args['max-tokens']);

interface Outcome {
  kind: 'stream' | 'json';
  startedAt: number;
  endedAt: number;
  ok: boolean;
  domain: string | null;
  content?: string;
  error?: string;
}

/** How the requests in flight when the host died ended. */
interface InFlightFigures {
  streams: number;
  json: number;
  /** Completed with exactly the text an uninterrupted request gets (no repeated or missing text). */
  intact: number;
  /** Completed with some other text. */
  altered: number;
  failed: number;
}

interface RunFigures {
  breakdown: Breakdown;
  detectionMs: number;
  steps: Record<string, number | null>;
  decisionToCommitMs: number;
  killToCommitMs: number;
  killToFirstNewActiveMs: number | null;
  /** Failed requests that arrived after the kill (the target is 0). */
  clientErrors: number;
  /** Failed requests already in flight when the host died. */
  inFlightAtKillErrors: number;
  inFlightAtKill: InFlightFigures;
  /** The API's haru_proxy_resends_total and haru_proxy_resend_refusals_total, by their labels. */
  migrations: Record<string, number>;
  requests: number;
  heldRequests: number;
  heldExtraMs: { p50: number | null; p99: number | null; max: number | null };
  simDelaysMs: { trainerExit: number; wake: number; probe: number; nvidiaSmi: number };
  overheadMs: number;
  /** The overhead, also without the fake nvidia-smi's own run time (a Node script started per query). */
  overheadWithoutSmiMs: number;
  errors: string[];
}

async function layoutFor(stateDir: string, slug: string) {
  const domain = async (name: string) => ({
    slug: name,
    supervisorUrl: `http://127.0.0.1:${await freePort()}`,
    slots: [
      {
        kind: 'inference' as const,
        gpuIndex: 0,
        models: await Promise.all(
          Array.from({ length: MODELS }, async (_, i) => ({
            name: `bench-${i}`,
            servingUrl: `http://127.0.0.1:${await freePort()}/v1`,
          })),
        ),
      },
      {
        kind: 'training' as const,
        gpuIndex: 0,
        command: ['node', SIM_TRAINER],
        checkpointDir: path.join(stateDir, name, 'checkpoints'),
      },
    ],
  });
  return fleetLayoutSchema.parse({
    fleet: { slug, activeDomain: 'east', policy: {} }, // production defaults
    domains: [await domain('east'), await domain('west')],
  });
}

/**
 * Wall time of one GPU memory read on the simulated host: the supervisor runs the fake nvidia-smi's two
 * queries in parallel (each a fresh Node process). Median of five.
 */
async function nvidiaSmiMs(gpuStateDir: string): Promise<number> {
  const env = { ...process.env, HARU_SIM_GPU_STATE: gpuStateDir };
  const one = (args: string[]) => execFileAsync(SIM_NVIDIA_SMI, args, { env });
  const times: number[] = [];
  for (let i = 0; i < 5; i += 1) {
    const t = Date.now();
    await Promise.all([one(NVIDIA_GPU_QUERY), one(NVIDIA_APPS_QUERY)]);
    times.push(Date.now() - t);
  }
  return median(times) ?? 0;
}

/** SIGTERM -> exit of the standby's trainer, from the fake trainer's own log. */
function trainerExitMs(checkpointDir: string): number {
  const lines = readFileSync(path.join(checkpointDir, 'trainer.log'), 'utf8').trim().split('\n');
  const events = lines.map((l) => JSON.parse(l) as { at: string; event: string });
  const stopping = events.filter((e) => e.event === 'stopping').at(-1);
  const final = events.filter((e) => e.event === 'final checkpoint').at(-1);
  return stopping && final ? Date.parse(final.at) - Date.parse(stopping.at) : 0;
}

interface BenchContext {
  address: string;
  client: Client;
  /** The prebuilt workflow bundle (HARU_WORKFLOW_BUNDLE). */
  bundle: string;
}

async function oneRun(run: number, ctx: BenchContext): Promise<RunFigures> {
  const stateDir = mkdtempSync(path.join(os.tmpdir(), 'haru-bench-failover-'));
  const slug = `bench-${process.pid}-${run}`;
  const layout = await layoutFor(stateDir, slug);
  const taskQueue = `bench-failover-${process.pid}-${run}`;
  const db = await createTestDatabase();
  const cleanups: (() => Promise<unknown>)[] = [() => db.drop()];
  let east: SimDomain | undefined;
  try {
    let west: SimDomain;
    [east, west] = await Promise.all([
      startSimDomain({ layout, domainSlug: 'east', stateDir: path.join(stateDir, 'east'), wakeDelayMs: WAKE_DELAY_MS }),
      startSimDomain({
        layout,
        domainSlug: 'west',
        stateDir: path.join(stateDir, 'west'),
        wakeDelayMs: WAKE_DELAY_MS,
        role: 'standby',
      }),
    ]);
    cleanups.push(
      () => west.kill(),
      () => east!.kill(),
    );
    const { fleetId } = await seedLayout(db.store, layout);
    const westId = (await db.store.fleets.snapshot(fleetId))!.domains.find((d) => d.slug === 'west')!.id;
    // Worker and API run as their own processes, as in production; this process only drives load and measures.
    const common = {
      DATABASE_URL: db.url,
      TEMPORAL_ADDRESS: ctx.address,
      HARU_TASK_QUEUE: taskQueue,
      LOG_LEVEL: 'info',
    };
    const worker = await startHaruProcess(
      'worker',
      {
        ...common,
        HARU_WORKFLOW_BUNDLE: ctx.bundle,
        HARU_WORKER_METRICS_PORT: '0',
        HARU_WORKER_SDK_METRICS_PORT: '0', // off: several workers share this machine
        HARU_WORKER_METRICS_HOST: '127.0.0.1',
      },
      'worker running',
    );
    cleanups.push(() => worker.stop());
    const apiPort = await freePort();
    const api = await startHaruProcess('api', { ...common, PORT: String(apiPort) }, 'api listening');
    cleanups.push(() => api.stop());
    const apiUrl = `http://127.0.0.1:${apiPort}`;
    const monitor = ctx.client.workflow.getHandle(monitorWorkflowId(fleetId));
    cleanups.push(() => monitor.terminate('bench over').catch(() => undefined));
    let movedAt = 0;
    const unlisten = await db.database.listen('haru_route', () => {
      movedAt ||= Date.now();
    });
    cleanups.push(() => unlisten());
    await eventually(
      'the monitor to see west as a viable standby',
      async () => (await monitor.query(healthQuery))?.domains.find((d) => d.slug === 'west')?.isViableStandby,
      120_000,
      100,
    );

    const openai = new OpenAI({
      baseURL: `${apiUrl}/v1`,
      apiKey: 'unused',
      maxRetries: 0, // the proxy, not the SDK, must carry requests through the failover
      timeout: 180_000,
      defaultHeaders: { 'x-haru-fleet': slug },
    });
    const outcomes: Outcome[] = [];
    let stop = false;
    const one = async (kind: Outcome['kind'], model: string) => {
      const startedAt = Date.now();
      try {
        let content = '';
        let domain: string | null;
        const request = { model, messages: [{ role: 'user' as const, content: 'hello' }], max_tokens: MAX_TOKENS };
        if (kind === 'stream') {
          const { data, response } = await openai.chat.completions.create({ ...request, stream: true }).withResponse();
          domain = response.headers.get('x-haru-domain');
          for await (const chunk of data) content += chunk.choices[0]?.delta.content ?? '';
        } else {
          const { data, response } = await openai.chat.completions.create(request).withResponse();
          domain = response.headers.get('x-haru-domain');
          content = data.choices[0]?.message.content ?? '';
        }
        outcomes.push({ kind, startedAt, endedAt: Date.now(), ok: content.length > 0, domain, content });
      } catch (err) {
        outcomes.push({ kind, startedAt, endedAt: Date.now(), ok: false, domain: null, error: String(err) });
      }
    };
    const loops = Array.from({ length: CONCURRENCY }, async (_, i) => {
      while (!stop) await one(i % 2 ? 'json' : 'stream', `bench-${i % MODELS}`);
    });

    await eventually('steady traffic', () => outcomes.filter((o) => o.ok).length >= 40, 60_000);
    const killAt = Date.now();
    await east.kill();
    await eventually('the route to move to west', async () => movedAt > 0, 120_000, 5);
    await eventually(
      'traffic from the new active',
      () => outcomes.filter((o) => o.ok && o.domain === 'west').length >= 40,
      60_000,
    );
    stop = true;
    await Promise.all(loops);

    const [operation] = (await db.store.operations.list(fleetId)).filter((o) => o.kind === 'promote');
    if (!operation || operation.targetDomainId !== westId) throw new Error('no promotion of west was recorded');
    const handle = ctx.client.workflow.getHandle(operation.workflowId);
    cleanups.push(() => handle.terminate('bench over').catch(() => undefined));
    const progress = await handle.query(progressQuery);
    const history = await handle.fetchHistory();
    if (args.timeline) printTimeline(history, Date.parse(operation.createdAt));
    const stepMs = (name: string) => {
      const s = progress.steps.find((x) => x.step === name);
      return s?.startedAt && s.finishedAt ? Date.parse(s.finishedAt) - Date.parse(s.startedAt) : null;
    };
    const commit = progress.steps.find((s) => s.step === 'commitRouting')!;
    const committedAt = Date.parse(commit.finishedAt!);
    const decidedAt = Date.parse(operation.createdAt);

    // The simulator's own delays inside the promotion, from the simulator's records.
    const wakeCalls = await Promise.all(
      west.models.map(async (m) => {
        const state = (await (await fetch(`http://127.0.0.1:${m.port}/_sim/state`)).json()) as { calls: string[] };
        return state.calls.filter((c) => c.startsWith('POST /wake_up')).length;
      }),
    );
    const probeEvent = (await db.store.events.list(fleetId, { limit: 1_000 })).find(
      (e) => e.operationId === operation.id && e.data.step === 'probeModels' && e.data.status === 'succeeded',
    );
    const probeMs = Math.max(0, ...[...(probeEvent?.message.matchAll(/ (\d+) ms/g) ?? [])].map((m) => Number(m[1])));
    // Engines on one GPU wake one after the other (the supervisor serialises per GPU).
    const sim = {
      trainerExit: trainerExitMs(path.join(stateDir, 'west', 'checkpoints')),
      wake: wakeCalls.reduce((a, b) => a + b, 0) * WAKE_DELAY_MS,
      probe: probeMs,
      nvidiaSmi: await nvidiaSmiMs(west.gpuStateDir),
    };

    const afterKill = outcomes.filter((o) => o.endedAt > killAt);
    const inFlight = afterKill.filter((o) => o.startedAt < killAt);
    // Every request asks the same of a deterministic model: the usual answer before the kill is the reference.
    const reference = outcomes.find((o) => o.ok && o.endedAt < killAt)?.content;
    const intact = (o: Outcome) => o.ok && o.content === reference;
    const inFlightAtKill: InFlightFigures = {
      streams: inFlight.filter((o) => o.kind === 'stream').length,
      json: inFlight.filter((o) => o.kind === 'json').length,
      intact: inFlight.filter(intact).length,
      altered: inFlight.filter((o) => o.ok && !intact(o)).length,
      failed: inFlight.filter((o) => !o.ok).length,
    };
    const migrations = await migrationCounters(apiUrl);
    const baseline = (kind: Outcome['kind']) =>
      median(
        outcomes.filter((o) => o.ok && o.kind === kind && o.endedAt < killAt).map((o) => o.endedAt - o.startedAt),
      ) ?? 0;
    // Held: arrived after the kill (or was in flight then) and was answered only after the route moved.
    const held = outcomes.filter((o) => o.ok && o.endedAt > killAt && o.startedAt < movedAt && o.endedAt > movedAt);
    const extra = held.map((o) => o.endedAt - o.startedAt - baseline(o.kind));
    const firstNew = outcomes.filter((o) => o.ok && o.domain === 'west').sort((a, b) => a.endedAt - b.endedAt)[0];
    const steps = Object.fromEntries(
      ['stopTraining', 'verifyGpuReleased', 'wakeModels', 'probeModels', 'commitRouting'].map((s) => [s, stepMs(s)]),
    );
    const decisionToCommitMs = committedAt - decidedAt;
    const breakdown = historyBreakdown(history, decidedAt, committedAt);
    return {
      breakdown,
      detectionMs: decidedAt - killAt,
      steps,
      decisionToCommitMs,
      killToCommitMs: committedAt - killAt,
      killToFirstNewActiveMs: firstNew ? firstNew.endedAt - killAt : null,
      clientErrors: afterKill.filter((o) => !o.ok && o.startedAt >= killAt).length,
      inFlightAtKillErrors: inFlightAtKill.failed,
      inFlightAtKill,
      migrations,
      requests: outcomes.length,
      heldRequests: held.length,
      heldExtraMs: { p50: percentile(extra, 50), p99: percentile(extra, 99), max: max(extra) },
      simDelaysMs: sim,
      overheadMs: decisionToCommitMs - sim.trainerExit - sim.wake - sim.probe,
      overheadWithoutSmiMs: decisionToCommitMs - sim.trainerExit - sim.wake - sim.probe - sim.nvidiaSmi,
      errors: [...new Set(afterKill.filter((o) => !o.ok).map((o) => o.error ?? 'empty answer'))].slice(0, 5),
    };
  } finally {
    for (const fn of cleanups.reverse()) await fn().catch(() => undefined);
    rmSync(stateDir, { recursive: true, force: true });
  }
}

/** The API's migration counters from its /metrics, keyed `name{labels}` without the common prefix. */
async function migrationCounters(apiUrl: string): Promise<Record<string, number>> {
  const text = await (await fetch(`${apiUrl}/metrics`)).text();
  const out: Record<string, number> = {};
  for (const m of text.matchAll(/^haru_proxy_(resends_total|resend_refusals_total)(\{[^}]*\}) (\S+)$/gm)) {
    out[`${m[1]}${m[2]}`] = Number(m[3]);
  }
  return out;
}

async function main(): Promise<void> {
  const stack = await startBenchStack();
  const ctx: BenchContext = { address: stack.temporal.address, client: stack.client, bundle: stack.bundle };
  const runs: RunFigures[] = [];
  try {
    for (let i = 1; i <= RUNS; i += 1) {
      const r = await oneRun(i, ctx);
      runs.push(r);
      process.stdout.write(
        `run ${i}/${RUNS}: detection ${r.detectionMs} ms, decision->commit ${r.decisionToCommitMs} ms, ` +
          `overhead ${r.overheadMs} ms, errors ${r.clientErrors}, held ${r.heldRequests}, ` +
          `in flight at kill ${JSON.stringify(r.inFlightAtKill)}, migrations ${JSON.stringify(r.migrations)}\n`,
      );
    }
  } finally {
    await stack.stop();
  }
  const sumOf = (counters: Record<string, number>, match: string) =>
    Object.entries(counters)
      .filter(([k]) => k.includes(match))
      .reduce((n, [, v]) => n + v, 0);
  const migrated = (r: RunFigures, outcome: string) => sumOf(r.migrations, `outcome="${outcome}"`);
  const col = (f: (r: RunFigures) => number | null) => [
    fmt(median(runs.map(f))),
    fmt(Math.min(...runs.map((r) => f(r) ?? Infinity))),
    fmt(Math.max(...runs.map((r) => f(r) ?? -Infinity))),
  ];
  const rows: [string, (r: RunFigures) => number | null][] = [
    ['detection (kill -> promote decision)', (r) => r.detectionMs],
    ...['stopTraining', 'verifyGpuReleased', 'wakeModels', 'probeModels', 'commitRouting'].map(
      (s) => [`step ${s}`, (r: RunFigures) => r.steps[s] ?? null] as [string, (r: RunFigures) => number | null],
    ),
    ['decision -> routing committed', (r) => r.decisionToCommitMs],
    ['kill -> routing committed', (r) => r.killToCommitMs],
    ['kill -> first answer from new active', (r) => r.killToFirstNewActiveMs],
    ['simulator: trainer exit', (r) => r.simDelaysMs.trainerExit],
    ['simulator: wake', (r) => r.simDelaysMs.wake],
    ['simulator: probe', (r) => r.simDelaysMs.probe],
    ['simulator: nvidia-smi read', (r) => r.simDelaysMs.nvidiaSmi],
    ['orchestration overhead', (r) => r.overheadMs],
    ['overhead without nvidia-smi', (r) => r.overheadWithoutSmiMs],
    ['  of which: monitor -> workflow start', (r) => r.breakdown.startMs],
    ['  of which: workflow tasks (sum)', (r) => r.breakdown.workflowTasksMs],
    ['  workflow tasks (count)', (r) => r.breakdown.workflowTasks],
    ['  of which: bookkeeping activities (sum)', (r) => r.breakdown.bookkeepingMs],
    ['  bookkeeping activities (count)', (r) => r.breakdown.bookkeepingActivities],
    ['  step activities incl. simulator (sum)', (r) => r.breakdown.stepActivitiesMs],
    ['held requests (count)', (r) => r.heldRequests],
    ['held extra latency p50', (r) => r.heldExtraMs.p50],
    ['held extra latency p99', (r) => r.heldExtraMs.p99],
    ['held extra latency max', (r) => r.heldExtraMs.max],
    ['client-visible errors (arrived after kill)', (r) => r.clientErrors],
    ['in flight at kill: streams', (r) => r.inFlightAtKill.streams],
    ['in flight at kill: non-streaming', (r) => r.inFlightAtKill.json],
    ['in flight at kill: completed with the uninterrupted text', (r) => r.inFlightAtKill.intact],
    ['in flight at kill: completed with other text', (r) => r.inFlightAtKill.altered],
    ['errors of requests in flight at kill', (r) => r.inFlightAtKillErrors],
    ['resends attempted (API)', (r) => migrated(r, 'attempted')],
    ['resends succeeded (API)', (r) => migrated(r, 'succeeded')],
    ['resends failed (API)', (r) => migrated(r, 'failed')],
    ['resends refused (API)', (r) => sumOf(r.migrations, 'resend_refusals_total')],
    ['requests sent', (r) => r.requests],
  ];
  printTable(
    `failover: ${RUNS} runs, wake delay ${WAKE_DELAY_MS} ms, ${MODELS} model(s), ${CONCURRENCY} concurrent clients (ms unless counted)`,
    ['figure', 'median', 'min', 'max'],
    rows.map(([name, f]) => [name, ...col(f)]),
  );
  const file = writeResult('failover', {
    options: {
      runs: RUNS,
      wakeDelayMs: WAKE_DELAY_MS,
      models: MODELS,
      concurrency: CONCURRENCY,
      maxTokens: MAX_TOKENS,
    },
    medians: Object.fromEntries(rows.map(([name, f]) => [name, median(runs.map(f))])),
    runs,
  });
  process.stdout.write(`\nwritten: ${path.relative(process.cwd(), file)}\n`);
}

main().then(
  () => process.exit(0),
  (err: unknown) => {
    process.stderr.write(`bench:failover failed: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
    process.exit(1);
  },
);
