import type { ModelStatus } from '../schemas/supervisor';

/**
 * How a sleep treats requests still in flight, as vLLM's `POST /sleep?mode=` (its `PauseMode`,
 * vllm/v1/engine/core.py `pause_scheduler`): `wait` stops scheduling new requests and lets the running ones
 * finish before the memory is released; `abort` (vLLM's default) ends every running and waiting request.
 */
export type SleepMode = 'wait' | 'abort';

/** The first vLLM release whose `/sleep` reads `mode` (vllm-project/vllm#34528, merged 2026-02-13). */
export const SLEEP_MODE_MIN_VERSION = [0, 17, 0] as const;

/**
 * Whether the vLLM of `version` (its `GET /version`) honours `POST /sleep?mode=wait`. Older servers read only
 * `level` and silently ignore `mode` (they abort), so only the version can tell; an unreadable or unparseable
 * version counts as too old. Pre-releases, dev and local builds (`0.17.0rc1`, `0.17.0.dev5`, `0.17.1+cu128`)
 * count by their release numbers.
 */
export function supportsSleepWaitMode(version: string | null): boolean {
  const match = version ? /^v?(\d+)\.(\d+)(?:\.(\d+))?/.exec(version.trim()) : null;
  if (!match) return false;
  const have = [Number(match[1]), Number(match[2]), Number(match[3] ?? 0)];
  for (let i = 0; i < 3; i += 1) {
    if (have[i]! !== SLEEP_MODE_MIN_VERSION[i]) return have[i]! > SLEEP_MODE_MIN_VERSION[i]!;
  }
  return true;
}

/** One model's requests still in flight: running in the engine, or waiting in its queue (null: unknown). */
export interface InFlight {
  model: string;
  running: number | null;
  waiting: number | null;
}

/** What a drain sees at one look: done when every model reports 0 running and 0 waiting. */
export interface DrainLook {
  isDrained: boolean;
  runningRequests: number;
  waitingRequests: number;
  /** Models with something in flight or an unknown count, as reported. */
  inFlight: InFlight[];
  /** Models whose counts are unknown (they count as busy). */
  unknown: string[];
}

/**
 * Judges one look of a drain. Waiting requests count like running ones: vLLM's `abort` sleep ends them too,
 * and a `wait` sleep would hold them until the next wake.
 */
export function judgeDrain(
  models: readonly Pick<ModelStatus, 'name' | 'runningRequests' | 'waitingRequests'>[],
): DrainLook {
  const counts = models.map((m) => ({
    model: m.name,
    running: m.runningRequests,
    // A supervisor from before the waiting count sends none: it cannot hold a drain up.
    waiting: m.waitingRequests === undefined ? 0 : m.waitingRequests,
  }));
  const sum = (pick: (c: InFlight) => number | null) => counts.reduce((n, c) => n + (pick(c) ?? 0), 0);
  const unknown = counts.filter((c) => c.running === null || c.waiting === null).map((c) => c.model);
  const inFlight = counts.filter((c) => c.running !== 0 || c.waiting !== 0);
  const runningRequests = sum((c) => c.running);
  const waitingRequests = sum((c) => c.waiting);
  return {
    isDrained: inFlight.length === 0,
    runningRequests,
    waitingRequests,
    inFlight,
    unknown,
  };
}

/**
 * The mode a demotion sleeps with after its drain: `wait` when the drain left nothing in flight (a request that
 * slips in between the drain's last look and the sleep finishes instead of being cut), `abort` when the drain
 * budget ran out with requests in flight (the budget bounds how long a demotion waits for them; the drain's
 * result already reports them).
 */
export function sleepModeAfterDrain(look: Pick<DrainLook, 'isDrained'>): SleepMode {
  return look.isDrained ? 'wait' : 'abort';
}

/** One line for the requests a drain left in flight: `llama: 2 running, 5 waiting; qwen: unknown`. */
export function describeInFlight(inFlight: readonly InFlight[]): string {
  return inFlight
    .map((c) =>
      c.running === null || c.waiting === null
        ? `${c.model}: unknown${c.running !== null ? ` (${c.running} running)` : ''}`
        : `${c.model}: ${c.running} running, ${c.waiting} waiting`,
    )
    .join('; ');
}
