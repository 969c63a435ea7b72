import { ConfigError } from '../../schemas/env';
import {
  findMigInstance,
  type ListedGpu,
  type MigInstance,
  NVIDIA_LIST_ARGS,
  NVIDIA_XML_ARGS,
  parseNvidiaList,
  parseNvidiaMigXml,
} from './mig';
import { type Exec, GpuQueryError, type GpuMemoryReader, type GpuReading, runTool } from './types';

/**
 * The per-GPU query. `uuid` is in it because per-process rows name their GPU by UUID only; the join
 * needs it. `nounits` prints bare MiB figures.
 */
export const NVIDIA_GPU_QUERY = ['--query-gpu=index,uuid,memory.used,memory.total', '--format=csv,noheader,nounits'];
/** The per-process query. Its figures stand in for the GPU's where the device prints no totals. */
export const NVIDIA_APPS_QUERY = ['--query-compute-apps=pid,used_memory,gpu_uuid', '--format=csv,noheader,nounits'];

/**
 * What nvidia-smi prints instead of a figure it does not have, and what that means here: `unavailable` (the
 * device has no such counter: MIG totals on older drivers, vGPUs), `permission` (NVML_ERROR_NO_PERMISSION:
 * MIG mode gives a whole GPU's memory only to privileged callers), `lost` (NVML_ERROR_GPU_IS_LOST: the GPU
 * fell off the bus) and `unknown` (NVML_ERROR_UNKNOWN). The strings are nvidia-smi's own.
 */
export const NVIDIA_PLACEHOLDERS = {
  '[N/A]': 'unavailable',
  'N/A': 'unavailable',
  '[Not Supported]': 'unavailable',
  '[Insufficient Permissions]': 'permission',
  '[GPU is lost]': 'lost',
  '[Unknown Error]': 'unknown',
} as const;
type Placeholder = (typeof NVIDIA_PLACEHOLDERS)[keyof typeof NVIDIA_PLACEHOLDERS];

/** A figure, or the placeholder printed instead (a bracketed string not in the list counts as unknown). */
type Cell = { mib: number } | { placeholder: Placeholder; text: string };

function placeholder(cell: string): Cell | null {
  const known = (NVIDIA_PLACEHOLDERS as Record<string, Placeholder>)[cell];
  if (known) return { placeholder: known, text: cell };
  return /^\[.*\]$/.test(cell) ? { placeholder: 'unknown', text: cell } : null;
}

interface GpuRow {
  index: number;
  uuid: string;
  used: Cell;
  total: Cell;
}
interface AppRow {
  pid: number;
  usedMiB: number | null;
  gpuUuid: string;
}

/** A slot's MIG instance: `device` as configured, `field` where (for messages). */
export interface MigSlot {
  gpuIndex: number;
  device: string;
  field: string;
}

/** The figures of a slot's MIG instance, or why they cannot be had. */
export type MigFigures =
  { device: string; usedMiB: number | null; totalMiB: number | null } | { device: string; missing: string };

function rows(stdout: string, columns: number, command: string): string[][] {
  return stdout
    .split('\n')
    .map((line) => line.trim())
    .filter(Boolean)
    .map((line, i) => {
      const cells = line.split(',').map((c) => c.trim());
      if (cells.length !== columns) {
        throw new GpuQueryError(
          command,
          `printed an unparseable line ${i + 1} (${columns} columns expected): ${line.slice(0, 200)}`,
        );
      }
      return cells;
    });
}

function int(cell: string, what: string, command: string): number {
  if (!/^\d+$/.test(cell))
    throw new GpuQueryError(command, `printed ${JSON.stringify(cell)} where ${what} was expected`);
  return Number(cell);
}

function mib(cell: string, what: string, command: string): Cell {
  const hidden = placeholder(cell);
  if (hidden) return hidden;
  if (!/^\d+(\.\d+)?$/.test(cell)) {
    throw new GpuQueryError(command, `printed ${JSON.stringify(cell)} where ${what} in MiB was expected`);
  }
  return { mib: Number(cell) };
}

/** Parses `--query-gpu=index,uuid,memory.used,memory.total --format=csv,noheader,nounits`. */
export function parseNvidiaGpus(stdout: string, command = 'nvidia-smi --query-gpu'): GpuRow[] {
  const parsed = rows(stdout, 4, command).map(([index, uuid, used, total]) => {
    const lostUuid = uuid === '[GPU is lost]';
    if (!uuid || (placeholder(uuid) && !lostUuid)) {
      throw new GpuQueryError(command, `printed GPU ${index} without a UUID`);
    }
    return {
      index: int(index!, 'a GPU index', command),
      uuid,
      used: lostUuid ? placeholder(uuid)! : mib(used!, 'memory.used', command),
      total: mib(total!, 'memory.total', command),
    };
  });
  if (parsed.length === 0) throw new GpuQueryError(command, 'reported no GPUs');
  return parsed;
}

/** Parses `--query-compute-apps=pid,used_memory,gpu_uuid --format=csv,noheader,nounits` (no processes: empty). */
export function parseNvidiaApps(stdout: string, command = 'nvidia-smi --query-compute-apps'): AppRow[] {
  return rows(stdout, 3, command).map(([pid, used, gpuUuid]) => {
    const cell = mib(used!, 'used_memory', command);
    // A process whose usage is hidden could be holding anything: null, never a guessed zero.
    return { pid: int(pid!, 'a pid', command), usedMiB: 'mib' in cell ? cell.mib : null, gpuUuid: gpuUuid! };
  });
}

const kindOf = (gpu: GpuRow): Placeholder | null => {
  const kinds = [gpu.used, gpu.total].flatMap((c) => ('placeholder' in c ? [c.placeholder] : []));
  // The gravest first: a lost GPU is lost whatever else it says.
  return (['lost', 'unknown', 'permission', 'unavailable'] as const).find((k) => kinds.includes(k)) ?? null;
};

/**
 * Joins GPUs and processes by UUID and decides, per GPU, what its figures are:
 *  - a slot's MIG instance (`mig`): that instance's own memory, whatever the GPU prints;
 *  - readable totals: the device's;
 *  - `[N/A]` / `[Not Supported]` totals: the sum of its processes, `totalMiB: null`;
 *  - `[Insufficient Permissions]`, `[GPU is lost]`, `[Unknown Error]`: no figures, an `error` naming the GPU and
 *    the fix. Other GPUs of the host are still reported.
 * A process on a GPU that is not listed is an error, not ignored.
 */
export function joinNvidia(
  gpus: GpuRow[],
  apps: AppRow[],
  command = 'nvidia-smi --query-compute-apps',
  mig: ReadonlyMap<number, MigFigures> = new Map(),
): GpuReading[] {
  const byUuid = new Map(gpus.map((g) => [g.uuid, g]));
  for (const app of apps) {
    if (!byUuid.has(app.gpuUuid)) {
      throw new GpuQueryError(command, `reported pid ${app.pid} on ${app.gpuUuid}, which is not a listed GPU`);
    }
  }
  return gpus
    .map((gpu): GpuReading => {
      const processes = apps.filter((a) => a.gpuUuid === gpu.uuid).map((a) => ({ pid: a.pid, usedMiB: a.usedMiB }));
      const base = { index: gpu.index, uuid: gpu.uuid, processes, migDevice: null, error: null };
      const failed = (kind: 'permission' | 'lost' | 'unknown', message: string): GpuReading => ({
        ...base,
        usedMiB: null,
        totalMiB: null,
        source: 'device',
        error: { kind, message: `GPU ${gpu.index} (${gpu.uuid}): ${message}` },
      });
      const kind = kindOf(gpu);
      if (kind === 'lost') {
        return failed(
          'lost',
          'nvidia-smi prints [GPU is lost]: the GPU fell off the bus and nothing on it can be verified; reset it (nvidia-smi -r) or reboot the host',
        );
      }
      const instance = mig.get(gpu.index);
      if (instance) {
        if ('missing' in instance)
          return failed('unknown', `the slot's MIG instance cannot be read: ${instance.missing}`);
        if (instance.usedMiB === null || instance.totalMiB === null) {
          return failed('unknown', `nvidia-smi -q -x gives no memory figures for MIG instance ${instance.device}`);
        }
        return {
          ...base,
          usedMiB: instance.usedMiB,
          totalMiB: instance.totalMiB,
          source: 'mig',
          migDevice: instance.device,
        };
      }
      if ('mib' in gpu.used && 'mib' in gpu.total) {
        return { ...base, usedMiB: gpu.used.mib, totalMiB: gpu.total.mib, source: 'device' };
      }
      if (kind === 'unknown') {
        return failed(
          'unknown',
          'nvidia-smi prints [Unknown Error] for its memory: look for Xid errors in the kernel log (dmesg)',
        );
      }
      if (kind === 'permission') {
        return failed(
          'permission',
          "nvidia-smi prints [Insufficient Permissions] for its memory (MIG is on, and NVML gives a whole GPU only to privileged callers): name the slot's MIG instance in the supervisor config (training[].mig, from nvidia-smi -L), or run the supervisor with that privilege",
        );
      }
      const hidden = processes.find((p) => p.usedMiB === null);
      if (hidden) {
        return failed('unknown', `nvidia-smi reports neither the GPU's totals nor the memory of pid ${hidden.pid}`);
      }
      const perProcess = processes.reduce((sum, p) => sum + (p.usedMiB ?? 0), 0);
      return { ...base, usedMiB: perProcess, totalMiB: null, source: 'processes' };
    })
    .sort((a, b) => a.index - b.index);
}

/** The figures of every slot's MIG instance, from `nvidia-smi -L` and `-q -x`. */
export function migFigures(
  slots: readonly MigSlot[],
  listed: ListedGpu[],
  instances: MigInstance[],
): Map<number, MigFigures> {
  const figures = new Map<number, MigFigures>();
  for (const slot of slots) {
    const found = findMigInstance(slot.device, slot.gpuIndex, listed, instances);
    figures.set(
      slot.gpuIndex,
      typeof found === 'string'
        ? { device: slot.device, missing: found }
        : { device: slot.device, usedMiB: found.usedMiB, totalMiB: found.totalMiB },
    );
  }
  return figures;
}

/**
 * NVIDIA adapter: two nvidia-smi queries, plus `-L` and `-q -x` when a slot names a MIG instance (`binary` may
 * be another executable, e.g. the simulator's).
 */
export function createNvidiaReader(opts: {
  exec: Exec;
  binary?: string;
  timeoutMs: number;
  mig?: readonly MigSlot[];
}): GpuMemoryReader {
  const binary = opts.binary ?? 'nvidia-smi';
  const migSlots = opts.mig ?? [];
  const run = (args: string[]) => runTool(opts.exec, binary, args, opts.timeoutMs);
  const readMig = async () => {
    const [list, xml] = await Promise.all([run(NVIDIA_LIST_ARGS), run(NVIDIA_XML_ARGS)]);
    return {
      listed: parseNvidiaList(list, [binary, ...NVIDIA_LIST_ARGS].join(' ')),
      instances: parseNvidiaMigXml(xml, [binary, ...NVIDIA_XML_ARGS].join(' ')),
    };
  };
  return {
    vendor: 'nvidia',
    async checkConfig() {
      if (migSlots.length === 0) return;
      const { listed, instances } = await readMig().catch((err: Error) => {
        throw new ConfigError(`cannot check ${migSlots.map((s) => s.field).join(', ')}: ${err.message}`);
      });
      const problems = migSlots.flatMap((slot) => {
        const found = findMigInstance(slot.device, slot.gpuIndex, listed, instances);
        return typeof found === 'string' ? [`${slot.field}: ${found}`] : [];
      });
      if (problems.length) throw new ConfigError(`invalid supervisor config:\n  ${problems.join('\n  ')}`);
    },
    async read() {
      const gpuCommand = [binary, ...NVIDIA_GPU_QUERY].join(' ');
      const appsCommand = [binary, ...NVIDIA_APPS_QUERY].join(' ');
      const [gpuOut, appsOut, mig] = await Promise.all([
        run(NVIDIA_GPU_QUERY),
        run(NVIDIA_APPS_QUERY),
        migSlots.length ? readMig() : null,
      ]);
      return joinNvidia(
        parseNvidiaGpus(gpuOut, gpuCommand),
        parseNvidiaApps(appsOut, appsCommand),
        appsCommand,
        mig ? migFigures(migSlots, mig.listed, mig.instances) : new Map(),
      );
    },
  };
}
