import {
  type GpuMemory,
  type GpuModelMemory,
  type SupervisorConfig,
  VLLM_DEFAULT_GPU_MEMORY_UTILIZATION,
} from '../schemas/supervisor';
import type { GpuReading } from './gpu';
import type { ListenerTable } from './listeners';

/**
 * Adds to each GPU the vLLM servers configured on it: their pids (the port's listener and its descendants,
 * less `trainerPids`, which a supervisor that spawned both would otherwise count twice), the memory those pids
 * hold there, and what a wake needs free: `wakeMiB`, else `gpuMemoryUtilization × total − residue`. vLLM sizes
 * an engine as that share of the device's total (its startup check refuses to start when free memory is below
 * it), and a sleeping engine keeps its CUDA context and graph pools, the residue.
 */
export function withModelMemory(
  gpus: GpuReading[],
  config: SupervisorConfig,
  listeners: ListenerTable,
  trainerPids: ReadonlySet<number>,
): GpuMemory[] {
  return gpus.map((gpu) => {
    const slot = config.inference.find((s) => s.gpuIndex === gpu.index);
    const models = (slot?.models ?? []).map((model): GpuModelMemory => {
      const pids = listeners.servingPids(model.port).filter((pid) => !trainerPids.has(pid));
      const held = gpu.processes.filter((p) => !p.foreign && pids.includes(p.pid));
      // Hidden per-process figures (MIG unprivileged, host pids in a container): the residue is not known.
      const known = (gpu.source !== 'mig' || gpu.processes.length > 0) && gpu.pidSpace !== 'unmapped';
      const residueMiB =
        known && held.every((p) => p.usedMiB !== null) ? held.reduce((n, p) => n + (p.usedMiB ?? 0), 0) : null;
      const share = model.gpuMemoryUtilization ?? VLLM_DEFAULT_GPU_MEMORY_UTILIZATION;
      const wakeNeedMiB =
        model.wakeMiB ??
        (gpu.totalMiB === null ? null : Math.max(0, Math.round(share * gpu.totalMiB) - (residueMiB ?? 0)));
      return { name: model.name, pids, residueMiB, wakeNeedMiB };
    });
    return { ...gpu, models };
  });
}
