import { type PromSample, sumSamples } from './prometheus-text';

/**
 * Whether a vLLM engine still serves inference, judged from outside (docs/architecture.md §9.2). Its API server
 * keeps answering `/health` and `/metrics` while the engine core is stuck, so admin answers prove nothing; the
 * engine's own counters do: they move only when the engine steps. Pure: the status view feeds it readings and
 * synthetic-completion outcomes and asks for a verdict.
 */

/**
 * Default of HARU_VLLM_WEDGE_MS: requests in the engine and no progress for this long make it `wedged`, and an
 * idle engine gets a synthetic completion every half of it, unanswered after the other half. With the
 * monitor's three failed polls a wedged active is failed over in about 12 s under traffic and 12-17 s idle.
 */
export const DEFAULT_WEDGE_MS = 10_000;

/** Answers of 5xx in a row to the synthetic completion that make the engine `erroring`. */
export const ERROR_ANSWERS = 2;

/**
 * The metrics that move only when the engine steps, as vLLM names them (vllm/v1/metrics/loggers.py; prometheus
 * adds `_total` to counters): tokens generated and prefilled, requests finished (any `finished_reason`), and
 * the KV-cache share, which grows chunk by chunk through a long prefill that generates nothing yet (older
 * vLLM: `gpu_cache_usage_perc`). Scheduler gauges (running, waiting) are set from the same steps, but the
 * simulator keeps them live, so they are the load, not the progress.
 */
const PROGRESS_METRICS = [
  ['vllm:generation_tokens_total'],
  ['vllm:prompt_tokens_total'],
  ['vllm:request_success_total'],
  ['vllm:kv_cache_usage_perc', 'vllm:gpu_cache_usage_perc'],
] as const;

/** What one `/metrics` read says about the engine. */
export interface EngineReading {
  /** When the read started (ms): the figures are of that moment or later. */
  atMs: number;
  /** `vllm:num_requests_running` / `vllm:num_requests_waiting`, summed over the engines. */
  running: number;
  waiting: number;
  /** Generated tokens (`vllm:generation_tokens_total`); null when not exposed. */
  generatedTokens: number | null;
  /** The progress metrics (PROGRESS_METRICS) in order, null where absent: any change is progress. */
  progress: readonly (number | null)[];
}

/** The reading of `samples`, a `/metrics` read started at `atMs`. */
export function readingOf(samples: PromSample[], atMs: number): EngineReading {
  return {
    atMs,
    running: sumSamples(samples, 'vllm:num_requests_running') ?? 0,
    waiting: sumSamples(samples, 'vllm:num_requests_waiting') ?? 0,
    generatedTokens: sumSamples(samples, 'vllm:generation_tokens_total'),
    progress: PROGRESS_METRICS.map((names) =>
      names.reduce<number | null>((found, name) => found ?? sumSamples(samples, name), null),
    ),
  };
}

/** How a synthetic completion ended. `failed`: no answer for another reason (refused, reset): no engine evidence. */
export type ProbeOutcome =
  | { kind: 'answered'; status: number; detail: string; atMs: number }
  | { kind: 'timeout'; atMs: number }
  | { kind: 'failed'; atMs: number };

/** What the judgement remembers of one engine. Build with `newEngineRecord`; never mutated. */
export interface EngineRecord {
  /** The latest reading; null before the first. */
  reading: EngineReading | null;
  /** When the progress metrics last changed (the reading that first showed the new figures). */
  movedAtMs: number | null;
  /** The first reading of the current run with requests in the engine and unchanged progress; null when none. */
  stalledSinceMs: number | null;
  /** The synthetic completion in flight: when it started and the progress before it. */
  probe: { startedAtMs: number; before: readonly (number | null)[] | null } | null;
  /** When the last synthetic completion ended. */
  probeEndedAtMs: number | null;
  /** One that timed out, judged by the first reading started after it ended. */
  unanswered: { startedAtMs: number; endedAtMs: number; before: readonly (number | null)[] | null } | null;
  /** Proved wedged by an unanswered synthetic completion: until progress or an answer. */
  wedgedBy: string | null;
  /** 5xx answers in a row, the last one's detail. */
  errors: { count: number; detail: string };
}

export const newEngineRecord = (): EngineRecord => ({
  reading: null,
  movedAtMs: null,
  stalledSinceMs: null,
  probe: null,
  probeEndedAtMs: null,
  unanswered: null,
  wedgedBy: null,
  errors: { count: 0, detail: '' },
});

const sameProgress = (a: readonly (number | null)[] | null, b: readonly (number | null)[]) =>
  a !== null && a.length === b.length && a.every((v, i) => v === b[i]);

/** The record after one more reading. */
export function observeReading(record: EngineRecord, reading: EngineReading): EngineRecord {
  const moved = !sameProgress(record.reading?.progress ?? null, reading.progress);
  const hasWork = reading.running + reading.waiting > 0;
  let { unanswered, wedgedBy, errors } = record;
  if (moved) {
    // The engine stepped: whatever it was blamed for, it serves someone.
    [unanswered, wedgedBy, errors] = [null, null, { count: 0, detail: '' }];
  } else if (unanswered && reading.atMs >= unanswered.endedAtMs) {
    if (sameProgress(unanswered.before, reading.progress)) {
      const seconds = ((unanswered.endedAtMs - unanswered.startedAtMs) / 1000).toFixed(1);
      wedgedBy = `a synthetic completion (max_tokens 1) unanswered for ${seconds} s and no progress since (${figures(reading)})`;
    }
    unanswered = null;
  }
  return {
    ...record,
    reading,
    movedAtMs: moved ? reading.atMs : record.movedAtMs,
    stalledSinceMs: !hasWork ? null : moved || record.stalledSinceMs === null ? reading.atMs : record.stalledSinceMs,
    unanswered,
    wedgedBy,
    errors,
  };
}

/**
 * Whether to send a synthetic completion at `nowMs`: none in flight, a reading no older than the interval
 * (half of `wedgeMs`) shows no request in the engine, and neither progress nor a synthetic completion came
 * within the interval (after a first 5xx, the next is sent at once to confirm it). A busy engine is never probed.
 */
export function isProbeDue(record: EngineRecord, nowMs: number, wedgeMs: number): boolean {
  const { reading } = record;
  const intervalMs = wedgeMs / 2;
  if (record.probe || record.unanswered || !reading || nowMs - reading.atMs > intervalMs) return false;
  if (reading.running + reading.waiting > 0) return false;
  if (record.movedAtMs !== null && nowMs - record.movedAtMs < intervalMs) return false;
  if (record.errors.count > 0 && record.errors.count < ERROR_ANSWERS) return true;
  return record.probeEndedAtMs === null || nowMs - record.probeEndedAtMs >= intervalMs;
}

/** The record once a synthetic completion started at `atMs`. */
export const probeStarted = (record: EngineRecord, atMs: number): EngineRecord => ({
  ...record,
  probe: { startedAtMs: atMs, before: record.reading?.progress ?? null },
});

/** The record once the synthetic completion in flight ended as `outcome`. */
export function probeEnded(record: EngineRecord, outcome: ProbeOutcome): EngineRecord {
  const { probe } = record;
  const ended = { ...record, probe: null, probeEndedAtMs: outcome.atMs };
  if (!probe) return ended;
  if (outcome.kind === 'timeout') {
    return { ...ended, unanswered: { startedAtMs: probe.startedAtMs, endedAtMs: outcome.atMs, before: probe.before } };
  }
  if (outcome.kind === 'failed') return ended;
  if (outcome.status >= 200 && outcome.status < 300)
    return { ...ended, wedgedBy: null, errors: { count: 0, detail: '' } };
  if (outcome.status >= 500) return { ...ended, errors: { count: record.errors.count + 1, detail: outcome.detail } };
  return ended; // a 4xx speaks of the request (a model name, a key), not of the engine
}

/** Why an engine does not serve inference, or null while nothing proves it. */
export interface EngineVerdict {
  condition: 'wedged' | 'erroring';
  message: string;
}

/**
 * The verdict on `record` (docs/architecture.md §9.2): `wedged` when requests stayed in the engine with no
 * progress over readings `wedgeMs` apart, or a synthetic completion went unanswered with no progress until
 * after it; `erroring` when the synthetic completion answered 5xx ERROR_ANSWERS times in a row. An engine
 * whose progress metrics move is never either, however slowly they move.
 */
export function judgeEngine(record: EngineRecord, wedgeMs: number): EngineVerdict | null {
  const { reading, stalledSinceMs } = record;
  if (reading && stalledSinceMs !== null && reading.atMs - stalledSinceMs >= wedgeMs) {
    const seconds = ((reading.atMs - stalledSinceMs) / 1000).toFixed(1);
    return { condition: 'wedged', message: `engine wedged: ${figures(reading)}, unchanged for ${seconds} s` };
  }
  if (record.wedgedBy) return { condition: 'wedged', message: `engine wedged: ${record.wedgedBy}` };
  if (record.errors.count >= ERROR_ANSWERS) {
    return {
      condition: 'erroring',
      message: `engine erroring: a synthetic completion answered ${record.errors.detail} ${record.errors.count} times in a row`,
    };
  }
  return null;
}

const figures = (r: EngineReading) =>
  `${r.running} running, ${r.waiting} waiting, vllm:generation_tokens_total ${r.generatedTokens ?? 'absent'}`;
