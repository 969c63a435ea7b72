import { z } from 'zod';
import { type Exec, GpuQueryError, type GpuMemoryReader, type GpuReading, runTool } from './types';

export const ROCM_MEMINFO_ARGS = ['--showmeminfo', 'vram', '--json'];

const MIB = 1024 * 1024;
const bytes = z.union([z.string().regex(/^\d+$/), z.number().int().nonnegative()]).transform(Number);
const cardSchema = z.object({
  'VRAM Total Memory (B)': bytes,
  'VRAM Total Used Memory (B)': bytes,
});

/**
 * Parses `rocm-smi --showmeminfo vram --json`: `{"card0": {"VRAM Total Memory (B)": "…", "VRAM Total Used
 * Memory (B)": "…"}, …}`. Non-card keys (`system`) are ignored. rocm-smi does not attribute VRAM per process
 * and device, so `processes` is empty: the used/total figures are the proof on AMD.
 */
export function parseRocmMeminfo(stdout: string, command = 'rocm-smi --showmeminfo vram --json'): GpuReading[] {
  let json: unknown;
  try {
    json = JSON.parse(stdout);
  } catch {
    throw new GpuQueryError(command, `printed non-JSON output: ${stdout.trim().slice(0, 200)}`);
  }
  if (!json || typeof json !== 'object') throw new GpuQueryError(command, 'printed JSON that is not an object');
  const gpus: GpuReading[] = [];
  for (const [key, value] of Object.entries(json)) {
    const match = /^card(\d+)$/.exec(key);
    if (!match) continue;
    const card = cardSchema.safeParse(value);
    if (!card.success) throw new GpuQueryError(command, `printed ${key} without VRAM used/total bytes`);
    gpus.push({
      index: Number(match[1]),
      uuid: key,
      usedMiB: Math.round(card.data['VRAM Total Used Memory (B)'] / MIB),
      totalMiB: Math.round(card.data['VRAM Total Memory (B)'] / MIB),
      processes: [],
      source: 'device',
      migDevice: null,
      error: null,
    });
  }
  if (gpus.length === 0) throw new GpuQueryError(command, 'reported no GPUs');
  return gpus.sort((a, b) => a.index - b.index);
}

/** AMD adapter (`binary` may be another executable). */
export function createAmdReader(opts: { exec: Exec; binary?: string; timeoutMs: number }): GpuMemoryReader {
  const binary = opts.binary ?? 'rocm-smi';
  return {
    vendor: 'amd',
    async checkConfig() {},
    async read() {
      const stdout = await runTool(opts.exec, binary, ROCM_MEMINFO_ARGS, opts.timeoutMs);
      return parseRocmMeminfo(stdout, [binary, ...ROCM_MEMINFO_ARGS].join(' '));
    },
  };
}
