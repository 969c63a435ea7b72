import { z } from 'zod';
import { type Exec, GpuQueryError, type GpuMemoryReader, type GpuReading, runTool } from './types';

/**
 * One call for the cards' VRAM and the compute processes, so both are one moment's. The source followed is
 * ROCm/rocm_smi_lib python_smi_tools/rocm_smi.py (showMemInfo, showPids, print2DArray, printSysLog).
 */
export const ROCM_MEMINFO_ARGS = ['--showmeminfo', 'vram', '--showpids', '--json'];
/** Which GPUs each compute process uses: rocm_smi.py prints it only as text (printListLog is silent in JSON). */
export const ROCM_PIDGPUS_ARGS = ['--showpidgpus'];

const MIB = 1024 * 1024;
const bytes = z.union([z.string().regex(/^\d+$/), z.number().int().nonnegative()]).transform(Number);
const cardSchema = z.object({
  'VRAM Total Memory (B)': bytes,
  'VRAM Total Used Memory (B)': bytes,
});

/** A KFD (compute) process of `--showpids`: its total VRAM over every GPU it uses (null: `UNKNOWN`). */
export interface RocmProcess {
  pid: number;
  gpuCount: number | null;
  vramBytes: number | null;
}

const count = (cell: string | undefined) => (cell && /^\d+$/.test(cell) ? Number(cell) : null);

/**
 * The `system` entries of `--showpids --json`. rocm_smi.py's print2DArray lowercases each row, drops the pid
 * into the key (`PID<pid>`) and joins the rest with `, `: `"PID4242": "python3, 1, 21474836480, 0, 0"`, i.e.
 * process name (its spaces become `, ` too), GPU(s) (a count), VRAM USED (bytes, over all its GPUs), SDMA USED,
 * CU OCCUPANCY; a figure it could not read is `unknown`. Parsed from the end, so a name with spaces does no harm.
 */
export function parseRocmPids(system: Record<string, unknown>, command: string): RocmProcess[] {
  const processes: RocmProcess[] = [];
  for (const [key, value] of Object.entries(system)) {
    const pid = /^PID(\d+)$/.exec(key)?.[1];
    if (!pid) continue;
    const cells = String(value).split(', ');
    if (cells.length < 5)
      throw new GpuQueryError(command, `printed ${key} as ${JSON.stringify(value)}: 5 fields expected`);
    const [gpus, vram] = cells.slice(-4);
    processes.push({ pid: Number(pid), gpuCount: count(gpus), vramBytes: count(vram) });
  }
  return processes;
}

/**
 * Parses `rocm-smi --showpidgpus` (text): per process `PID 4242 is using 2 DRM device(s):` and, on the next
 * line(s), the device indexes (`0 1 `), which are the `cardN` numbers of the JSON; `is using 0 DRM device(s)`
 * stands alone.
 */
export function parseRocmPidGpus(stdout: string, command = 'rocm-smi --showpidgpus'): Map<number, number[]> {
  const byPid = new Map<number, number[]>();
  const lines = stdout.split('\n');
  for (let i = 0; i < lines.length; i += 1) {
    const match = /^PID (\d+) is using (\d+) DRM device\(s\)/.exec(lines[i]!.trim());
    if (!match) continue;
    const want = Number(match[2]);
    const devices: number[] = [];
    while (devices.length < want && i + 1 < lines.length && /^[\d ]+$/.test(lines[i + 1]!.trim())) {
      devices.push(...lines[++i]!.trim().split(/\s+/).map(Number));
    }
    if (devices.length !== want) {
      throw new GpuQueryError(command, `printed ${want} devices for pid ${match[1]} but listed ${devices.length}`);
    }
    byPid.set(Number(match[1]), devices);
  }
  return byPid;
}

/**
 * Parses `rocm-smi --showmeminfo vram --showpids --json` (with `--showpidgpus` for where each process is):
 * `{"card0": {"VRAM Total Memory (B)": "…", "VRAM Total Used Memory (B)": "…"}, …, "system": {"PID4242": …}}`.
 * Each card lists the processes on it. rocm-smi gives a process's VRAM summed over its GPUs, so a process on
 * one GPU has its figure there, one on several has `usedMiB: null` on each (listed, amount not known).
 */
export function parseRocmMeminfo(
  stdout: string,
  command = 'rocm-smi --showmeminfo vram --showpids --json',
  pidGpus: ReadonlyMap<number, number[]> = new Map(),
): GpuReading[] {
  let json: unknown;
  try {
    json = JSON.parse(stdout);
  } catch {
    throw new GpuQueryError(command, `printed non-JSON output: ${stdout.trim().slice(0, 200)}`);
  }
  if (!json || typeof json !== 'object') throw new GpuQueryError(command, 'printed JSON that is not an object');
  const system = (json as { system?: unknown }).system;
  const processes =
    system && typeof system === 'object' ? parseRocmPids(system as Record<string, unknown>, command) : [];
  const gpus: GpuReading[] = [];
  for (const [key, value] of Object.entries(json)) {
    const match = /^card(\d+)$/.exec(key);
    if (!match) continue;
    const card = cardSchema.safeParse(value);
    if (!card.success) throw new GpuQueryError(command, `printed ${key} without VRAM used/total bytes`);
    const index = Number(match[1]);
    gpus.push({
      index,
      uuid: key,
      usedMiB: Math.round(card.data['VRAM Total Used Memory (B)'] / MIB),
      totalMiB: Math.round(card.data['VRAM Total Memory (B)'] / MIB),
      processes: processes
        .filter((p) => pidGpus.get(p.pid)?.includes(index))
        .map((p) => ({
          pid: p.pid,
          usedMiB: p.vramBytes !== null && pidGpus.get(p.pid)!.length === 1 ? Math.round(p.vramBytes / MIB) : null,
        })),
      source: 'device',
      migDevice: null,
      error: null,
    });
  }
  if (gpus.length === 0) throw new GpuQueryError(command, 'reported no GPUs');
  const unplaced = processes.find((p) => !pidGpus.has(p.pid));
  if (unplaced) {
    throw new GpuQueryError(
      command,
      `listed pid ${unplaced.pid}, which rocm-smi --showpidgpus does not place on a GPU`,
    );
  }
  return gpus.sort((a, b) => a.index - b.index);
}

/** AMD adapter (`binary` may be another executable). */
export function createAmdReader(opts: { exec: Exec; binary?: string; timeoutMs: number }): GpuMemoryReader {
  const binary = opts.binary ?? 'rocm-smi';
  return {
    vendor: 'amd',
    async checkConfig() {},
    async read() {
      const [meminfo, pidGpus] = await Promise.all([
        runTool(opts.exec, binary, ROCM_MEMINFO_ARGS, opts.timeoutMs),
        runTool(opts.exec, binary, ROCM_PIDGPUS_ARGS, opts.timeoutMs),
      ]);
      return parseRocmMeminfo(
        meminfo,
        [binary, ...ROCM_MEMINFO_ARGS].join(' '),
        parseRocmPidGpus(pidGpus, [binary, ...ROCM_PIDGPUS_ARGS].join(' ')),
      );
    },
  };
}
