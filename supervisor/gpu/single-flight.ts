import { GPU_MEMORY_MAX_AGE_LIMIT_MS } from '../../schemas/supervisor';
import type { GpuMemoryReader, GpuReading, SharedGpuReader } from './types';

/**
 * One read of the vendor tool at a time: callers that arrive while a read is in flight share it. Each run of
 * the tool is bounded by its timeout, and a tool stuck past its SIGKILL blocks further runs (see
 * createExecFileTool), so reads never pile up behind a hung tool.
 *
 * `startedSinceMs`: a reading whose run of the tool started at or after that time of the wall clock (the trainer's
 * end as the host recorded it, on the same clock), the last one (finished at most
 * GPU_MEMORY_MAX_AGE_LIMIT_MS ago) or the one in flight, else a new run. The GPU release step asks for one
 * started after its trainer ended, which the supervisor starts the moment a run ends (supervisor/main.ts).
 *
 * A caller may also take the last successful reading when it is at most `maxAgeMs` old, on this host's
 * monotonic clock: a promotion's wake re-checks the memory that its GPU release step read a moment before,
 * and a second run of nvidia-smi (100 ms and more) would only repeat it (docs/architecture.md §6.5).
 */
interface Reading {
  gpus: GpuReading[];
  at: number;
  startedAt: number;
}

export function singleFlight(
  reader: GpuMemoryReader,
  clock: () => number = () => performance.now(),
  wallClock: () => number = Date.now,
): SharedGpuReader {
  /** `startedAt`: when the tool was started, on the wall clock (what `startedSinceMs` is compared with). */
  let shared: { gpus: Promise<GpuReading[]>; startedAt: number } | null = null;
  /** `at`: when it finished, on the monotonic clock (what `maxAgeMs` is compared with). */
  let last: Reading | null = null;
  const run = () => {
    if (!shared) {
      const startedAt = wallClock();
      const gpus = reader
        .read()
        .then((gpus) => {
          last = { gpus, at: clock(), startedAt };
          return gpus;
        })
        .finally(() => (shared = null));
      shared = { gpus, startedAt };
    }
    return shared;
  };
  /** A run started at or after `sinceMs`: the one in flight, or a new one once an older one ends. */
  const runStartedSince = async (sinceMs: number): Promise<GpuReading[]> => {
    const current = run();
    if (current.startedAt >= sinceMs) return current.gpus;
    await current.gpus.catch(() => undefined);
    return run().gpus;
  };
  return {
    vendor: reader.vendor,
    checkConfig: () => reader.checkConfig(),
    async read(opts = {}) {
      const maxAgeMs = opts.maxAgeMs ?? 0;
      if (last && maxAgeMs > 0 && clock() - last.at <= maxAgeMs) return { gpus: last.gpus, ageMs: clock() - last.at };
      if (opts.startedSinceMs !== undefined) {
        const since = opts.startedSinceMs;
        if (last && last.startedAt >= since && clock() - last.at <= GPU_MEMORY_MAX_AGE_LIMIT_MS) {
          return { gpus: last.gpus, ageMs: clock() - last.at };
        }
        const gpus = await runStartedSince(since);
        return { gpus, ageMs: 0 };
      }
      const gpus = await run().gpus;
      return { gpus, ageMs: 0 };
    },
  };
}
