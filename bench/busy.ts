/**
 * Busy-versus-dead benchmark: two simulated domains (real processes), Haru's API and worker as their own
 * processes with the default policy. The active runs under saturating load through the proxy (more
 * concurrent requests than its `--max-num-seqs`, so requests wait) while its vLLM admin endpoints answer
 * in 2-30 s (the simulator's event-loop lag). Counts the failovers over `--duration-s`, then SIGKILLs the
 * active and times its detection; a second fleet's active is frozen (SIGSTOP, every process) and timed too.
 *
 *   npm run bench:busy -- [--duration-s 300] [--concurrency 24] [--max-num-seqs 8] [--lag-min-ms 2000] [--lag-max-ms 30000]
 *
 * Detection is the fault -> the monitor's promote decision (the operation's creation). Targets: 0 failovers,
 * killed <= 3 s, frozen <= 6 s.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import OpenAI from 'openai';
import { createTestDatabase, seedLayout } from '../db/testing';
import { fleetLayoutSchema } from '../schemas/layout';
import { type SimDomain, startSimDomain } from '../sim/domain';
import { signalPid } from '../sim/processes';
import { eventually } from '../test/support/eventually';
import { freePort } from '../test/support/ports';
import { twoDomainLayout } from '../test/support/sim-layout';
import { healthQuery, monitorWorkflowId } from '../workflows/definitions';
import { startHaruProcess } from './support/processes';
import { printTable, writeResult } from './support/report';
import { startBenchStack } from './support/stack';

const { values: args } = parseArgs({
  options: {
    'duration-s': { type: 'string', default: '300' },
    concurrency: { type: 'string', default: '24' },
    'max-num-seqs': { type: 'string', default: '8' },
    'lag-min-ms': { type: 'string', default: '2000' },
    'lag-max-ms': { type: 'string', default: '30000' },
  },
});
const DURATION_MS = Number(args['duration-s']) * 1_000;
const CONCURRENCY = Number(args.concurrency);
const MAX_NUM_SEQS = Number(args['max-num-seqs']);
const LAG = { adminLagMs: Number(args['lag-min-ms']), adminLagMaxMs: Number(args['lag-max-ms']) };
const MODEL = 'bench-0';

type Stack = Awaited<ReturnType<typeof startBenchStack>>;

/** One fleet (east active, west a sleeping standby) with its own database, worker and API processes. */
async function startFleet(stack: Stack, name: string) {
  const stateDir = mkdtempSync(path.join(os.tmpdir(), `haru-bench-busy-${name}-`));
  const slug = `busy-${name}-${process.pid}`;
  // Production defaults: an empty policy.
  const layout = fleetLayoutSchema.parse(
    await twoDomainLayout({ slug, model: MODEL, stateDir, policy: {}, servingPath: '/v1' }),
  );
  const db = await createTestDatabase();
  const cleanups: (() => Promise<unknown>)[] = [
    () => db.drop(),
    async () => rmSync(stateDir, { recursive: true, force: true }),
  ];
  const stop = async () => {
    for (const fn of cleanups.reverse()) await fn().catch(() => undefined);
  };
  try {
    const sim = (slug: string, role: 'active' | 'standby') =>
      startSimDomain({
        layout,
        domainSlug: slug,
        stateDir: path.join(stateDir, slug),
        role,
        tokensPerSecond: 100,
        maxNumSeqs: MAX_NUM_SEQS,
      });
    const [east, west] = await Promise.all([sim('east', 'active'), sim('west', 'standby')]);
    cleanups.push(
      () => west.kill(),
      () => east.kill(),
    );
    const { fleetId } = await seedLayout(db.store, layout);
    const common = {
      DATABASE_URL: db.url,
      TEMPORAL_ADDRESS: stack.temporal.address,
      HARU_TASK_QUEUE: `bench-busy-${name}-${process.pid}`,
    };
    const worker = await startHaruProcess(
      'worker',
      { ...common, HARU_WORKFLOW_BUNDLE: stack.bundle, HARU_WORKER_METRICS_PORT: '0' },
      'worker running',
    );
    cleanups.push(() => worker.stop());
    const apiPort = await freePort();
    const api = await startHaruProcess('api', { ...common, PORT: String(apiPort) }, 'api listening');
    cleanups.push(() => api.stop());
    const monitor = stack.client.workflow.getHandle(monitorWorkflowId(fleetId));
    cleanups.push(() => monitor.terminate('bench over').catch(() => undefined));
    await eventually(
      'the monitor to see west as a viable standby',
      async () => (await monitor.query(healthQuery))?.domains.find((d) => d.slug === 'west')?.isViableStandby,
      120_000,
      100,
    );
    const promotions = async () => (await db.store.operations.list(fleetId)).filter((o) => o.kind === 'promote');
    return { east, apiUrl: `http://127.0.0.1:${apiPort}`, slug, promotions, stop };
  } catch (err) {
    await stop();
    throw err;
  }
}

/** Saturating load through the proxy until `stop()`; counts answers and failures. */
function load(apiUrl: string, slug: string) {
  const openai = new OpenAI({
    baseURL: `${apiUrl}/v1`,
    apiKey: 'unused',
    maxRetries: 0,
    timeout: 120_000,
    defaultHeaders: { 'x-haru-fleet': slug },
  });
  const counts = { ok: 0, failed: 0 };
  let isStopped = false;
  const loops = Array.from({ length: CONCURRENCY }, async (_, i) => {
    while (!isStopped) {
      try {
        const request = { model: MODEL, messages: [{ role: 'user' as const, content: 'hello' }], max_tokens: 64 };
        if (i % 2) {
          for await (const _chunk of await openai.chat.completions.create({ ...request, stream: true }));
        } else await openai.chat.completions.create(request);
        counts.ok += 1;
      } catch {
        counts.failed += 1;
      }
    }
  });
  return {
    counts,
    async stop() {
      isStopped = true;
      await Promise.all(loops);
    },
  };
}

/** Fault -> promote decision, in ms. */
async function detection(fleet: Awaited<ReturnType<typeof startFleet>>, faultAt: number): Promise<number> {
  const [promotion] = await eventually(
    'a promotion',
    async () => {
      const found = await fleet.promotions();
      return found.length > 0 && found;
    },
    120_000,
    50,
  );
  return Date.parse(promotion!.createdAt) - faultAt;
}

async function main(): Promise<void> {
  const stack = await startBenchStack();
  const figures: Record<string, number | string> = {};
  try {
    const busy = await startFleet(stack, 'busy');
    try {
      await busy.east.faults.set(MODEL, { ...LAG, tokensPerSecond: 100 });
      const traffic = load(busy.apiUrl, busy.slug);
      process.stdout.write(
        `busy active under load for ${DURATION_MS / 1000} s (admin lag ${LAG.adminLagMs}-${LAG.adminLagMaxMs} ms)\n`,
      );
      const waiting = await sampleWaiting(busy.east, DURATION_MS);
      figures.failovers = (await busy.promotions()).length;
      figures.requestsOk = traffic.counts.ok;
      figures.requestsFailed = traffic.counts.failed;
      figures.maxWaitingRequests = waiting;
      await busy.east.faults.clear(MODEL);
      const killAt = Date.now();
      const before = (await busy.promotions()).length;
      await busy.east.kill();
      figures.killedDetectionMs = before === 0 ? await detection(busy, killAt) : 'n/a (already failed over)';
      await traffic.stop();
    } finally {
      await busy.stop();
    }
    const frozen = await startFleet(stack, 'frozen');
    try {
      const pids = [frozen.east.supervisorPid, ...frozen.east.models.map((m) => m.pid)];
      const freezeAt = Date.now();
      for (const pid of pids) signalPid(pid, 'SIGSTOP');
      figures.frozenDetectionMs = await detection(frozen, freezeAt);
      for (const pid of pids) signalPid(pid, 'SIGCONT');
    } finally {
      await frozen.stop();
    }
  } finally {
    await stack.stop();
  }
  printTable(
    'busy versus dead (default policy)',
    ['figure', 'value'],
    Object.entries(figures).map(([k, v]) => [k, v]),
  );
  const file = writeResult('busy', {
    args: { durationMs: DURATION_MS, concurrency: CONCURRENCY, maxNumSeqs: MAX_NUM_SEQS, lag: LAG },
    figures,
  });
  process.stdout.write(`written ${file}\n`);
}

/** The most requests the active's vLLM held waiting, sampled every second for `ms`. */
async function sampleWaiting(east: SimDomain, ms: number): Promise<number> {
  const end = Date.now() + ms;
  let most = 0;
  while (Date.now() < end) {
    const state = await fetch(`http://127.0.0.1:${east.models[0]!.port}/_sim/state`)
      .then((r) => r.json() as Promise<{ waiting: number }>)
      .catch(() => null);
    most = Math.max(most, state?.waiting ?? 0);
    await new Promise((r) => setTimeout(r, 1_000));
  }
  return most;
}

main().catch((err: Error) => {
  process.stderr.write(`${err.stack ?? err.message}\n`);
  process.exit(1);
});
