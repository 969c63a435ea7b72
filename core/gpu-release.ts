import type { GpuMemory } from '../schemas/supervisor';

/** What verifyGpuReleased saw on one training GPU (results recorded before the wake-fit rule carry only the first three). */
export interface VerifiedGpu {
  index: number;
  usedMiB: number;
  totalMiB: number | null;
  /** Held by processes other than this GPU's own vLLM servers; null when not known. */
  otherMiB?: number | null;
  freeMiB?: number | null;
  /** What this GPU's vLLM servers need free to wake; null when not known. */
  wakeNeedMiB?: number | null;
  /** The figures the verdict rests on. */
  proof?: string;
}

/**
 * The verdict on one GPU: what was seen, the problems that keep the step waiting, and `fatal`, set where
 * waiting cannot help (no privilege to read the GPU, a GPU off the bus): the step fails at once with it.
 */
export interface GpuVerdict {
  seen: VerifiedGpu;
  problems: string[];
  fatal?: string;
}

const mib = (n: number | null) => (n === null ? 'an unreported amount of' : String(n));

/** Where the figures come from, in words. */
function figuresOf(gpu: GpuMemory): string {
  if (gpu.source === 'mig') return `MIG instance ${gpu.migDevice}`;
  if (gpu.source === 'processes') return 'per-process figures';
  return 'device totals';
}

/**
 * How far the per-process list can be trusted. The NVIDIA driver gives host pids only: a supervisor in a
 * container without the host's /proc cannot tell its trainer's or its vLLMs' processes in that list
 * (`unmapped`), so the trainer-pid check rests on the supervisor's own stop proof instead (no live process
 * left in the run's cgroup or process group: stopTraining waited for it).
 */
function pidNote(gpu: GpuMemory): string {
  if (gpu.pidSpace === 'unmapped') {
    return "; per-process pids are the host's and this supervisor cannot map them (no host /proc): trainer pids not matched, the supervisor's stop proof stands instead";
  }
  if (gpu.pidSpace === 'mapped') return "; pids mapped from the host's namespace (NSpid)";
  return '';
}

/**
 * The verdict on one training GPU (see verifyGpuReleased): no process in `trainerPids` holds memory; memory
 * held by anything but this GPU's own vLLM servers (their residue while asleep) is at most `maxUsedRatio` of
 * the GPU; free memory covers what those servers need to wake. Without a device total only the pid check
 * applies, and `proof` says so, as it says which pids could be matched.
 */
export function judgeGpu(gpu: GpuMemory, trainerPids: readonly number[], maxUsedRatio: number): GpuVerdict {
  const { index } = gpu;
  const unknown: VerifiedGpu = {
    index,
    usedMiB: 0,
    totalMiB: gpu.totalMiB,
    otherMiB: null,
    freeMiB: null,
    wakeNeedMiB: null,
    proof: 'none',
  };
  if (gpu.error && gpu.error.kind !== 'unknown') return { seen: unknown, problems: [], fatal: gpu.error.message };
  if (gpu.error || gpu.usedMiB === null) {
    return { seen: unknown, problems: [gpu.error?.message ?? `GPU ${index}: memory not reported`] };
  }
  const problems: string[] = [];
  const known = gpu.processes.filter((p) => !p.foreign);
  for (const p of known) {
    if (trainerPids.includes(p.pid) && p.usedMiB !== 0) {
      problems.push(`GPU ${index}: trainer pid ${p.pid} still holds ${mib(p.usedMiB)} MiB`);
    }
  }
  const ownPids = new Set(gpu.models.flatMap((m) => m.pids));
  const residues = gpu.models.map((m) => m.residueMiB);
  const ownMiB = residues.reduce<number>((n, r) => n + (r ?? 0), 0);
  const others = gpu.processes.filter((p) => p.foreign || !ownPids.has(p.pid));
  const otherMiB = gpu.source === 'processes' ? others.reduce((n, p) => n + (p.usedMiB ?? 0), 0) : gpu.usedMiB - ownMiB;
  const needs = gpu.models.map((m) => m.wakeNeedMiB);
  const wakeNeedMiB = needs.includes(null) ? null : needs.reduce<number>((n, x) => n + (x ?? 0), 0);
  const freeMiB = gpu.totalMiB === null ? null : gpu.totalMiB - gpu.usedMiB;
  const residueNote = residues.includes(null) ? ', vLLM residue not reported (counted as other)' : '';
  const proof =
    gpu.totalMiB === null
      ? `${figuresOf(gpu)}: trainer pids only (no total, wake fit not checked)${pidNote(gpu)}`
      : `${figuresOf(gpu)}${residueNote}${pidNote(gpu)}`;
  const holders = () => {
    const listed = others.map((p) => `${p.foreign ? 'host pid' : 'pid'} ${p.pid} ${mib(p.usedMiB)} MiB`);
    return listed.length ? ` (held by ${listed.join(', ')})` : ' (no other process listed)';
  };
  if (gpu.totalMiB !== null) {
    const tolerance = Math.floor(maxUsedRatio * gpu.totalMiB);
    if (otherMiB > tolerance) {
      problems.push(
        `GPU ${index}: ${otherMiB} MiB held besides its vLLM servers (max ${tolerance} MiB, ${maxUsedRatio * 100}% of ${gpu.totalMiB})${holders()}`,
      );
    }
    if (wakeNeedMiB !== null && freeMiB !== null && freeMiB < wakeNeedMiB) {
      const each = gpu.models.map((m) => `${m.name} ${m.wakeNeedMiB}`).join(', ');
      problems.push(
        `GPU ${index}: ${freeMiB} MiB free, the models need ${wakeNeedMiB} MiB to wake (${each})${holders()}`,
      );
    }
  }
  return {
    seen: { index, usedMiB: gpu.usedMiB, totalMiB: gpu.totalMiB, otherMiB, freeMiB, wakeNeedMiB, proof },
    problems,
  };
}
