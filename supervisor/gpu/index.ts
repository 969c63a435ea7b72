import { createAmdReader } from './amd';
import { createNvidiaReader, type MigSlot } from './nvidia';
import type { Exec, GpuMemoryReader } from './types';

export { GpuQueryError, type Exec, type GpuMemoryReader, type GpuReading } from './types';
export { createExecFileTool, execFileTool } from './exec';
export type { MigSlot } from './nvidia';

/** The GPU memory adapter for `vendor`; `binary` replaces the vendor tool (HARU_GPU_SMI). */
export function createGpuReader(opts: {
  vendor: 'nvidia' | 'amd';
  exec: Exec;
  binary?: string;
  timeoutMs: number;
  mig?: readonly MigSlot[];
}): GpuMemoryReader {
  return opts.vendor === 'amd' ? createAmdReader(opts) : createNvidiaReader(opts);
}
