import type { GpuMemory } from '../../schemas/supervisor';
import { type Exec, GpuQueryError, type GpuMemoryReader, runTool } from './types';

/**
 * The per-GPU query. `uuid` is in it because per-process rows name their GPU by UUID only; the join
 * needs it. `nounits` prints bare MiB figures.
 */
export const NVIDIA_GPU_QUERY = ['--query-gpu=index,uuid,memory.used,memory.total', '--format=csv,noheader,nounits'];
/** The per-process query: MIG-safe, since per-process figures are reported even when the GPU totals are not. */
export const NVIDIA_APPS_QUERY = ['--query-compute-apps=pid,used_memory,gpu_uuid', '--format=csv,noheader,nounits'];

/** What nvidia-smi prints for a figure it does not have (MIG totals, some virtualised GPUs). */
const NOT_AVAILABLE = new Set(['[N/A]', 'N/A', '[Not Supported]', '[Unknown Error]']);

interface GpuRow {
  index: number;
  uuid: string;
  usedMiB: number | null;
  totalMiB: number | null;
}
interface AppRow {
  pid: number;
  usedMiB: number;
  gpuUuid: string;
}

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

function mib(cell: string, what: string, command: string): number | null {
  if (NOT_AVAILABLE.has(cell)) return null;
  if (!/^\d+(\.\d+)?$/.test(cell)) {
    throw new GpuQueryError(command, `printed ${JSON.stringify(cell)} where ${what} in MiB was expected`);
  }
  return Number(cell);
}

/** Parses `--query-gpu=index,uuid,memory.used,memory.total --format=csv,noheader,nounits`. */
export function parseNvidiaGpus(stdout: string, command = 'nvidia-smi --query-gpu'): GpuRow[] {
  const parsed = rows(stdout, 4, command).map(([index, uuid, used, total]) => {
    if (!uuid || NOT_AVAILABLE.has(uuid)) throw new GpuQueryError(command, `printed GPU ${index} without a UUID`);
    return {
      index: int(index!, 'a GPU index', command),
      uuid,
      usedMiB: mib(used!, 'memory.used', command),
      totalMiB: mib(total!, 'memory.total', command),
    };
  });
  if (parsed.length === 0) throw new GpuQueryError(command, 'reported no GPUs');
  return parsed;
}

/** Parses `--query-compute-apps=pid,used_memory,gpu_uuid --format=csv,noheader,nounits` (no processes: empty). */
export function parseNvidiaApps(stdout: string, command = 'nvidia-smi --query-compute-apps'): AppRow[] {
  return rows(stdout, 3, command).map(([pid, used, gpuUuid]) => {
    const usedMiB = mib(used!, 'used_memory', command);
    // A process whose usage is hidden could be holding anything: refuse to report a number for it.
    if (usedMiB === null) throw new GpuQueryError(command, `does not report the memory of pid ${pid}`);
    return { pid: int(pid!, 'a pid', command), usedMiB, gpuUuid: gpuUuid! };
  });
}

/**
 * Joins GPUs and processes by UUID. A GPU whose `memory.used` is not reported (MIG) gets the sum of its
 * processes instead, and `totalMiB: null`. A process on a GPU that is not listed is an error, not ignored.
 */
export function joinNvidia(gpus: GpuRow[], apps: AppRow[], command = 'nvidia-smi --query-compute-apps'): GpuMemory[] {
  const byUuid = new Map(gpus.map((g) => [g.uuid, g]));
  for (const app of apps) {
    if (!byUuid.has(app.gpuUuid)) {
      throw new GpuQueryError(command, `reported pid ${app.pid} on ${app.gpuUuid}, which is not a listed GPU`);
    }
  }
  return gpus
    .map((gpu) => {
      const processes = apps.filter((a) => a.gpuUuid === gpu.uuid).map((a) => ({ pid: a.pid, usedMiB: a.usedMiB }));
      const perProcess = processes.reduce((sum, p) => sum + p.usedMiB, 0);
      return {
        index: gpu.index,
        uuid: gpu.uuid,
        usedMiB: gpu.usedMiB ?? perProcess,
        totalMiB: gpu.usedMiB === null ? null : gpu.totalMiB,
        processes,
      };
    })
    .sort((a, b) => a.index - b.index);
}

/** NVIDIA adapter: two nvidia-smi queries (`binary` may be another executable, e.g. the simulator's). */
export function createNvidiaReader(opts: { exec: Exec; binary?: string; timeoutMs: number }): GpuMemoryReader {
  const binary = opts.binary ?? 'nvidia-smi';
  return {
    vendor: 'nvidia',
    async read() {
      const gpuCommand = [binary, ...NVIDIA_GPU_QUERY].join(' ');
      const appsCommand = [binary, ...NVIDIA_APPS_QUERY].join(' ');
      const [gpuOut, appsOut] = await Promise.all([
        runTool(opts.exec, binary, NVIDIA_GPU_QUERY, opts.timeoutMs),
        runTool(opts.exec, binary, NVIDIA_APPS_QUERY, opts.timeoutMs),
      ]);
      return joinNvidia(parseNvidiaGpus(gpuOut, gpuCommand), parseNvidiaApps(appsOut, appsCommand), appsCommand);
    },
  };
}
