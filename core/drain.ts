import type { ModelStatus, SleepMode } from '../schemas/supervisor';

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
