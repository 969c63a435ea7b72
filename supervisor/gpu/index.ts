import { createAmdReader } from './amd';
import { createNvidiaReader, type MigSlot } from './nvidia';
import { singleFlight } from './single-flight';
import type { Exec, GpuMemoryReader } from './types';

export { GpuQueryError, type Exec, type GpuMemoryReader, type GpuReading } from './types';
export { createExecFileTool, execFileTool } from './exec';
export type { MigSlot } from './nvidia';

/**
 * The GPU memory adapter for `vendor`, one read at a time (see singleFlight); `binary` replaces the vendor
 * tool (HARU_GPU_SMI).
 */
export function createGpuReader(opts: {
  vendor: 'nvidia' | 'amd';
  exec: Exec;
  binary?: string;
  timeoutMs: number;
  mig?: readonly MigSlot[];
}): GpuMemoryReader {
  const reader = opts.vendor === 'amd' ? createAmdReader(opts) : createNvidiaReader(opts);
  return singleFlight(reader);
}
