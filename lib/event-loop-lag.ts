import { performance } from 'node:perf_hooks';

/**
 * How far behind this process's event loop has run: the watcher's doubt in itself. A poll that timed out while
 * the loop stalled (the process starved of CPU, paused, or blocked by its own work) may have had its answer
 * waiting in the socket: libuv runs due timers before it reads sockets, so after a stall the deadline fires
 * first. Such a poll says nothing about the host (docs/architecture.md §9.2).
 */
export interface EventLoopLag {
  /**
   * The longest stall (ms) the loop had in a window from `sinceMs` (a `performance.now()` reading) to now,
   * including one still under way at the call.
   */
  maxSince(sinceMs: number): number;
  stop(): void;
}

/** How often the sampler asks to run: a stall shorter than this is not worth telling. */
const SAMPLE_MS = 20;
/** Stalls remembered: at one per sample, far longer than any poll's window. */
const KEPT = 256;

/** Starts a sampler: a timer every `sampleMs` (unref'd) that records how late it ran. */
export function startEventLoopLag(sampleMs = SAMPLE_MS, now: () => number = () => performance.now()): EventLoopLag {
  // Each stall as the time it ended and how long it was, in a ring.
  const endedAt = new Float64Array(KEPT);
  const lasted = new Float64Array(KEPT);
  let next = 0;
  let lastTick = now();
  const timer = setInterval(() => {
    const t = now();
    const late = t - lastTick - sampleMs;
    lastTick = t;
    if (late < sampleMs) return;
    endedAt[next] = t;
    lasted[next] = late;
    next = (next + 1) % KEPT;
  }, sampleMs);
  timer.unref();
  return {
    maxSince(sinceMs) {
      // A stall under way: the sampler has not run since it began.
      let max = Math.max(0, now() - lastTick - sampleMs);
      for (let i = 0; i < KEPT; i += 1) if (endedAt[i]! >= sinceMs && lasted[i]! > max) max = lasted[i]!;
      return max;
    },
    stop: () => clearInterval(timer),
  };
}

let shared: EventLoopLag | null = null;

/** This process's sampler, started on first use: one timer however many pollers ask. */
export function processEventLoopLag(): EventLoopLag {
  shared ??= startEventLoopLag();
  return shared;
}
