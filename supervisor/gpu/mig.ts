import { GpuQueryError } from './types';

/** `nvidia-smi -L`: every GPU and its MIG devices with their UUIDs. */
export const NVIDIA_LIST_ARGS = ['-L'];
/** `nvidia-smi -q -x`: the full query as XML, the one place that gives each MIG instance's own memory. */
export const NVIDIA_XML_ARGS = ['-q', '-x'];

/** A GPU of `nvidia-smi -L` with its MIG devices (`Device N` is the instance's index on its GPU). */
export interface ListedGpu {
  index: number;
  uuid: string;
  migs: { index: number; uuid: string }[];
}

/** A MIG instance of `nvidia-smi -q -x`: its GPU, GI/CI ids and `fb_memory_usage` (null for a placeholder). */
export interface MigInstance {
  gpuIndex: number;
  gpuUuid: string;
  index: number;
  gi: number;
  ci: number;
  usedMiB: number | null;
  totalMiB: number | null;
}

/**
 * Parses `nvidia-smi -L`:
 *   GPU 0: NVIDIA A100-SXM4-40GB (UUID: GPU-5d5ba0d6-...)
 *     MIG 1g.5gb      Device  0: (UUID: MIG-c6d4f1ef-...)
 * (the MIG line format is the one NVIDIA's MIG user guide shows).
 */
export function parseNvidiaList(stdout: string, command = 'nvidia-smi -L'): ListedGpu[] {
  const gpus: ListedGpu[] = [];
  for (const line of stdout.split('\n')) {
    const gpu = /^GPU (\d+): .*\(UUID: (GPU-[^)\s]+)\)\s*$/.exec(line.trim());
    if (gpu) {
      gpus.push({ index: Number(gpu[1]), uuid: gpu[2]!, migs: [] });
      continue;
    }
    const mig = /^MIG .*Device\s+(\d+): \(UUID: (MIG-[^)\s]+)\)\s*$/.exec(line.trim());
    if (mig) {
      const parent = gpus.at(-1);
      if (!parent) throw new GpuQueryError(command, `printed a MIG device before any GPU: ${line.trim()}`);
      parent.migs.push({ index: Number(mig[1]), uuid: mig[2]! });
    }
  }
  return gpus;
}

const tag = (xml: string, name: string): string | null =>
  new RegExp(`<${name}>([^<]*)</${name}>`).exec(xml)?.[1]?.trim() ?? null;

/** `40192 MiB` as a number; null for what nvidia-smi prints instead (`N/A`, `Insufficient Permissions`, …). */
const xmlMiB = (text: string | null): number | null => {
  const match = text ? /^(\d+) MiB$/.exec(text) : null;
  return match ? Number(match[1]) : null;
};

/**
 * The MIG instances in `nvidia-smi -q -x` (element names of nvsmi_device_v*.dtd): per `<gpu>`, its `<uuid>`,
 * and per `<mig_device>` its `<index>`, `<gpu_instance_id>`, `<compute_instance_id>` and `<fb_memory_usage>`.
 * Each instance's memory is readable without privileges even where the GPU's own reads
 * `Insufficient Permissions` (github.com/IDSIA/sacred/issues/864 shows such output). GPUs are numbered in
 * document order, as nvidia-smi numbers them.
 */
export function parseNvidiaMigXml(stdout: string, command = 'nvidia-smi -q -x'): MigInstance[] {
  if (!stdout.includes('<nvidia_smi_log>')) {
    throw new GpuQueryError(command, `printed no nvidia_smi_log: ${stdout.trim().slice(0, 200)}`);
  }
  const instances: MigInstance[] = [];
  const gpus = stdout.split(/<gpu id="[^"]*">/).slice(1);
  gpus.forEach((block, gpuIndex) => {
    const migSection = /<mig_devices>([\s\S]*?)<\/mig_devices>/.exec(block)?.[1] ?? '';
    const outside = block.replace(/<mig_devices>[\s\S]*?<\/mig_devices>/, '');
    const gpuUuid = tag(outside, 'uuid');
    if (!gpuUuid) throw new GpuQueryError(command, `printed GPU ${gpuIndex} without a uuid`);
    for (const device of migSection.split('<mig_device>').slice(1)) {
      const memory = /<fb_memory_usage>([\s\S]*?)<\/fb_memory_usage>/.exec(device)?.[1] ?? '';
      const index = tag(device, 'index');
      const gi = tag(device, 'gpu_instance_id');
      const ci = tag(device, 'compute_instance_id');
      if (!index || !gi || !ci || !/^\d+$/.test(index + gi + ci)) {
        throw new GpuQueryError(command, `printed a MIG device of GPU ${gpuIndex} without index, GI and CI`);
      }
      instances.push({
        gpuIndex,
        gpuUuid,
        index: Number(index),
        gi: Number(gi),
        ci: Number(ci),
        usedMiB: xmlMiB(tag(memory, 'used')),
        totalMiB: xmlMiB(tag(memory, 'total')),
      });
    }
  });
  return instances;
}

/**
 * Finds the instance `device` names: `MIG-<GPU-UUID>/<GI>/<CI>` directly, `MIG-<uuid>` through `nvidia-smi -L`
 * (its `Device N` is the instance's `<index>`). Returns a sentence saying why not instead when it is not there
 * or not on `gpuIndex`.
 */
export function findMigInstance(
  device: string,
  gpuIndex: number,
  listed: ListedGpu[],
  instances: MigInstance[],
): MigInstance | string {
  const legacy = /^MIG-(GPU-[^/]+)\/(\d+)\/(\d+)$/i.exec(device);
  let found: MigInstance | undefined;
  if (legacy) {
    found = instances.find(
      (m) =>
        m.gpuUuid.toLowerCase() === legacy[1]!.toLowerCase() &&
        m.gi === Number(legacy[2]) &&
        m.ci === Number(legacy[3]),
    );
  } else {
    const parent = listed.find((g) => g.migs.some((m) => m.uuid.toLowerCase() === device.toLowerCase()));
    const mig = parent?.migs.find((m) => m.uuid.toLowerCase() === device.toLowerCase());
    found = parent && mig ? instances.find((m) => m.gpuUuid === parent.uuid && m.index === mig.index) : undefined;
  }
  if (!found) {
    const known = listed.flatMap((g) => g.migs.map((m) => `${m.uuid} (GPU ${g.index})`));
    return `${device} is not a MIG device of this host (nvidia-smi -L lists ${known.join(', ') || 'none'})`;
  }
  if (found.gpuIndex !== gpuIndex) return `${device} is on GPU ${found.gpuIndex}, not GPU ${gpuIndex}`;
  return found;
}
