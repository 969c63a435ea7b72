import type { GpuMemoryReader, GpuReading, SharedGpuReader } from './types';

/**
 * One read of the vendor tool at a time: callers that arrive while a read is in flight share it. Each run of
 * the tool is bounded by its timeout, and a tool stuck past its SIGKILL blocks further runs (see
 * createExecFileTool), so reads never pile up behind a hung tool.
 *
 * A caller may also take the last successful reading when it is at most `maxAgeMs` old, on this host's
 * monotonic clock: a promotion's wake re-checks the memory that its GPU release step read a moment before,
 * and a second run of nvidia-smi (100 ms and more) would only repeat it (docs/architecture.md §6.5).
 */
export function singleFlight(reader: GpuMemoryReader, clock: () => number = () => performance.now()): SharedGpuReader {
  let shared: Promise<GpuReading[]> | null = null;
  let last: { gpus: GpuReading[]; at: number } | null = null;
  const run = () => {
    shared ??= reader
      .read()
      .then((gpus) => {
        last = { gpus, at: clock() };
        return gpus;
      })
      .finally(() => (shared = null));
    return shared;
  };
  return {
    vendor: reader.vendor,
    checkConfig: () => reader.checkConfig(),
    async read(opts = {}) {
      const maxAgeMs = opts.maxAgeMs ?? 0;
      if (last && maxAgeMs > 0 && clock() - last.at <= maxAgeMs) return { gpus: last.gpus, ageMs: clock() - last.at };
      const gpus = await run();
      return { gpus, ageMs: 0 };
    },
  };
}
