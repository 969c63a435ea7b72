import { execFile } from 'node:child_process';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { promisify } from 'node:util';
import { SIM_NVIDIA_SMI } from '../../sim/domain';
import { NVIDIA_APPS_QUERY, NVIDIA_GPU_QUERY } from '../../supervisor/gpu/nvidia';
import { eventually } from '../../test/support/eventually';
import { progressQuery } from '../../workflows/definitions';
import { type FailoverBenchContext, type FailoverFleet, startFailoverFleet } from './failover-fleet';
import { type FailoverLoad, type Outcome, startFailoverLoad } from './failover-load';
import { type Breakdown, historyBreakdown, printTimeline } from './history';
import { max, median, percentile } from './stats';

const execFileAsync = promisify(execFile);

export type { FailoverBenchContext } from './failover-fleet';

export interface FailoverRunOptions {
  /** How long each fake vLLM `/wake_up` takes (ms). */
  wakeDelayMs: number;
  models: number;
  /** Concurrent OpenAI SDK clients through the proxy. */
  concurrency: number;
  maxTokens: number;
  /** Successful answers before the kill, and from the new active before the run ends. */
  answersBefore: number;
  answersAfter: number;
  /** Timed reads of the fake nvidia-smi afterwards (0: none, and no figure without it). */
  nvidiaSmiReads: number;
  /** Print the promotion's Temporal history. */
  shouldPrintTimeline: boolean;
  /** Told how long each part of the run took (ms), as it ends. */
  onPhase?: (phase: string, ms: number) => void;
}

/** How the requests in flight when the host died ended. */
export interface InFlightFigures {
  streams: number;
  json: number;
  /** Completed with exactly the text an uninterrupted request gets (no repeated or missing text). */
  intact: number;
  /** Completed with some other text. */
  altered: number;
  failed: number;
}

export interface RunFigures {
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
  /** The simulator's own delays; nvidiaSmi is null when it was not read (`nvidiaSmiReads` 0). */
  simDelaysMs: { trainerExit: number; wake: number; probe: number; nvidiaSmi: number | null };
  overheadMs: number;
  /** The overhead, also without the fake nvidia-smi's own run time (a Node script started per query). */
  overheadWithoutSmiMs: number | null;
  errors: string[];
}

export const PROMOTION_STEPS = ['stopTraining', 'verifyGpuReleased', 'wakeModels', 'probeModels', 'commitRouting'];

/**
 * Wall time of one GPU memory read on the simulated host: the supervisor runs the fake nvidia-smi's two
 * queries in parallel (each a fresh Node process). Median of `reads`.
 */
async function nvidiaSmiMs(gpuStateDir: string, reads: number): Promise<number | null> {
  const env = { ...process.env, HARU_SIM_GPU_STATE: gpuStateDir };
  const one = (args: string[]) => execFileAsync(SIM_NVIDIA_SMI, args, { env });
  const times: number[] = [];
  for (let i = 0; i < reads; i += 1) {
    const t = Date.now();
    await Promise.all([one(NVIDIA_GPU_QUERY), one(NVIDIA_APPS_QUERY)]);
    times.push(Date.now() - t);
  }
  return median(times);
}

/** SIGTERM -> exit of the standby's trainer, from the fake trainer's own log. */
function trainerExitMs(checkpointDir: string): number {
  const lines = readFileSync(path.join(checkpointDir, 'trainer.log'), 'utf8').trim().split('\n');
  const events = lines.map((l) => JSON.parse(l) as { at: string; event: string });
  const stopping = events.filter((e) => e.event === 'stopping').at(-1);
  const final = events.filter((e) => e.event === 'final checkpoint').at(-1);
  return stopping && final ? Date.parse(final.at) - Date.parse(stopping.at) : 0;
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

/** How the requests around the kill ended: errors, the in-flight ones, the held ones and their extra wait. */
function clientFigures(outcomes: Outcome[], killAt: number, movedAt: number) {
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
  const usual = (kind: Outcome['kind']) =>
    median(outcomes.filter((o) => o.ok && o.kind === kind && o.endedAt < killAt).map((o) => o.endedAt - o.startedAt)) ??
    0;
  // Held: arrived after the kill (or was in flight then) and was answered only after the route moved.
  const held = outcomes.filter((o) => o.ok && o.endedAt > killAt && o.startedAt < movedAt && o.endedAt > movedAt);
  const extra = held.map((o) => o.endedAt - o.startedAt - usual(o.kind));
  const firstNew = outcomes.filter((o) => o.ok && o.domain === 'west').sort((a, b) => a.endedAt - b.endedAt)[0];
  return {
    killToFirstNewActiveMs: firstNew ? firstNew.endedAt - killAt : null,
    clientErrors: afterKill.filter((o) => !o.ok && o.startedAt >= killAt).length,
    inFlightAtKillErrors: inFlightAtKill.failed,
    inFlightAtKill,
    requests: outcomes.length,
    heldRequests: held.length,
    heldExtraMs: { p50: percentile(extra, 50), p99: percentile(extra, 99), max: max(extra) },
    errors: [...new Set(afterKill.filter((o) => !o.ok).map((o) => o.error ?? 'empty answer'))].slice(0, 5),
  };
}

/**
 * One failover under load: a fleet of two simulated domains (`startFailoverFleet`), OpenAI SDK clients
 * through the proxy; after `answersBefore` answers east is SIGKILLed, the monitor promotes west, and the run
 * ends after `answersAfter` answers from west. Figures come from the promotion's `progress` query and
 * Temporal history, the simulator's own records and the clients. Undoes everything it started.
 */
export async function failoverRun(
  run: number,
  ctx: FailoverBenchContext,
  opts: FailoverRunOptions,
): Promise<RunFigures> {
  return failoverOn(await startFailoverFleet(run, ctx, opts), opts);
}

/** `failoverRun` on a fleet already started (`startFailoverFleet`); stops it. */
export async function failoverOn(fleet: FailoverFleet, opts: FailoverRunOptions): Promise<RunFigures> {
  const { db, west, fleetId, ctx } = fleet;
  let phaseAt = Date.now();
  const phase = (name: string) => {
    opts.onPhase?.(name, Date.now() - phaseAt);
    phaseAt = Date.now();
  };
  let load: FailoverLoad | undefined;
  try {
    load = startFailoverLoad({ ...opts, apiUrl: fleet.apiUrl, slug: fleet.slug });
    const { outcomes } = load;
    await eventually('steady traffic', () => outcomes.filter((o) => o.ok).length >= opts.answersBefore, 60_000);
    phase('steady traffic');
    const killAt = Date.now();
    await fleet.east.kill();
    await eventually('the route to move to west', async () => fleet.movedAt() > 0, 120_000, 5);
    await eventually(
      'traffic from the new active',
      () => outcomes.filter((o) => o.ok && o.domain === 'west').length >= opts.answersAfter,
      60_000,
    );
    await load.stop();
    phase('kill to answers from the new active');

    const [operation] = (await db.store.operations.list(fleetId)).filter((o) => o.kind === 'promote');
    if (!operation || operation.targetDomainId !== fleet.westId) throw new Error('no promotion of west was recorded');
    const handle = ctx.client.workflow.getHandle(operation.workflowId);
    fleet.cleanups.push(() => handle.terminate('bench over').catch(() => undefined));
    const progress = await handle.query(progressQuery);
    const history = await handle.fetchHistory();
    if (opts.shouldPrintTimeline) printTimeline(history, Date.parse(operation.createdAt));
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
      trainerExit: trainerExitMs(path.join(fleet.stateDir, 'west', 'checkpoints')),
      wake: wakeCalls.reduce((a, b) => a + b, 0) * opts.wakeDelayMs,
      probe: probeMs,
      nvidiaSmi: opts.nvidiaSmiReads > 0 ? await nvidiaSmiMs(west.gpuStateDir, opts.nvidiaSmiReads) : null,
    };
    const migrations = await migrationCounters(fleet.apiUrl);
    const decisionToCommitMs = committedAt - decidedAt;
    const overheadMs = decisionToCommitMs - sim.trainerExit - sim.wake - sim.probe;
    phase('figures');
    return {
      breakdown: historyBreakdown(history, decidedAt, committedAt),
      detectionMs: decidedAt - killAt,
      steps: Object.fromEntries(PROMOTION_STEPS.map((s) => [s, stepMs(s)])),
      decisionToCommitMs,
      killToCommitMs: committedAt - killAt,
      ...clientFigures(outcomes, killAt, fleet.movedAt()),
      migrations,
      simDelaysMs: sim,
      overheadMs,
      overheadWithoutSmiMs: sim.nvidiaSmi === null ? null : overheadMs - sim.nvidiaSmi,
    };
  } finally {
    // Clients still sending (a run that failed) end once the API is gone.
    const clientsDone = load?.stop();
    await fleet.stop();
    await clientsDone;
    phase('stop');
  }
}
