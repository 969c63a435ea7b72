import type { GpuMemoryReader, GpuReading, SharedGpuReader } from './types';

/**
 * One read of the vendor tool at a time: callers that arrive while a read is in flight share it. Each run of
 * the tool is bounded by its timeout, and a tool stuck past its SIGKILL blocks further runs (see
 * createExecFileTool), so reads never pile up behind a hung tool.
 *
 * A caller may also take the last successful reading when it is at most `maxAgeMs` old, on this host's
 * monotonic clock: a promotion's wake re-checks the memory that its GPU release step read a moment before,
 * and a second run of nvidia-smi (100 ms and more) would only repeat it (docs/architecture.md §6.5).
 *
 * And a caller may ask for a reading begun after the last training run on the host ended
 * (`afterTrainingExit`): the GPU release step's proof. `trainingExited` starts that reading the moment a run
 * ends, so it is under way, or done, by the time the step asks, instead of starting then.
 */
export function singleFlight(reader: GpuMemoryReader, clock: () => number = () => performance.now()): SharedGpuReader {
  // Runs are numbered as they begin: "begun after the exit" compares numbers, never two clock readings.
  let begun = 0;
  let shared: { gpus: Promise<GpuReading[]>; seq: number } | null = null;
  let last: { gpus: GpuReading[]; at: number; seq: number } | null = null;
  /** How many runs had begun when a training run last ended on this host; null until one has. */
  let runsAtTrainingExit: number | null = null;

  const run = (): { gpus: Promise<GpuReading[]>; seq: number } => {
    if (shared) return shared;
    const seq = ++begun;
    const flight = {
      seq,
      gpus: reader
        .read()
        .then((gpus) => {
          last = { gpus, at: clock(), seq };
          return gpus;
        })
        .finally(() => {
          if (shared === flight) shared = null;
        }),
    };
    shared = flight;
    return flight;
  };

  /** A reading of a run numbered above `after`: the last one, the one in flight, or (after that one) a new run. */
  async function begunAfter(after: number, maxAgeMs: number): Promise<{ gpus: GpuReading[]; ageMs: number }> {
    if (last && last.seq > after && clock() - last.at <= maxAgeMs) {
      return { gpus: last.gpus, ageMs: clock() - last.at };
    }
    const flight = shared;
    if (flight && flight.seq > after) return { gpus: await flight.gpus, ageMs: 0 };
    if (flight) await flight.gpus.catch(() => undefined); // begun too early: one run at a time, then ours
    return { gpus: await run().gpus, ageMs: 0 };
  }

  return {
    vendor: reader.vendor,
    checkConfig: () => reader.checkConfig(),
    async read(opts = {}) {
      const maxAgeMs = opts.maxAgeMs ?? 0;
      // With no training exit yet, a run begun from now on.
      if (opts.afterTrainingExit) return begunAfter(runsAtTrainingExit ?? begun, maxAgeMs);
      if (last && maxAgeMs > 0 && clock() - last.at <= maxAgeMs) return { gpus: last.gpus, ageMs: clock() - last.at };
      const gpus = await run().gpus;
      return { gpus, ageMs: 0 };
    },
    trainingExited() {
      runsAtTrainingExit = begun;
      // Begun now (after the one in flight, if any), so the release step finds it under way; a failure is that
      // step's to see on its own read.
      void begunAfter(runsAtTrainingExit, 0).catch(() => undefined);
    },
  };
}
