import type { SupervisorStatus } from '../schemas/supervisor';

/** What a standby's training GPU did: trained, or sat idle (no run, or one stopping or restarting). */
export const STANDBY_GPU_USES = ['training', 'idle'] as const;
export type StandbyGpuUse = (typeof STANDBY_GPU_USES)[number];

/** One answered poll of a standby as the harvest counts it: when it was heard, and each training GPU's use. */
export interface StandbySample {
  /** The watcher's receive time of the answer (ms, its own clock: never the host's). */
  atMs: number;
  gpus: readonly { gpuIndex: number; use: StandbyGpuUse }[];
}

/** A standby's training GPUs as one status shows them: a running run trains; anything else is idle. Pure. */
export function standbySample(status: Pick<SupervisorStatus, 'training'>, atMs: number): StandbySample {
  return {
    atMs,
    gpus: status.training.map((run) => ({
      gpuIndex: run.gpuIndex,
      use: run.state === 'running' ? 'training' : 'idle',
    })),
  };
}

/**
 * The GPU-seconds a standby spent between two answered polls, by use: each training GPU's use as the earlier poll
 * saw it, for the time until the later one. A gap longer than `maxGapMs` (polls missed, a watch handed on, the
 * domain not a standby between them) counts nothing: what the GPUs did then is not known. Pure.
 */
export function standbyGpuSeconds(
  earlier: StandbySample,
  later: StandbySample,
  maxGapMs: number,
): Record<StandbyGpuUse, number> {
  const spent: Record<StandbyGpuUse, number> = { training: 0, idle: 0 };
  const gapMs = later.atMs - earlier.atMs;
  if (gapMs <= 0 || gapMs > maxGapMs) return spent;
  for (const gpu of earlier.gpus) spent[gpu.use] += gapMs / 1000;
  return spent;
}
