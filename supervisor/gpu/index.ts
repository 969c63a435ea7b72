import { ConfigError } from '../../schemas/env';
import { createAmdReader } from './amd';
import { createNvidiaReader, type MigSlot } from './nvidia';
import { createPidTranslator, inPidSpace } from './pid-namespace';
import { singleFlight } from './single-flight';
import type { Exec, SharedGpuReader } from './types';

export { GpuQueryError, type Exec, type GpuMemoryReader, type GpuReading, type SharedGpuReader } from './types';
export { createExecFileTool, execFileTool } from './exec';
export type { MigSlot } from './nvidia';

/**
 * How long one run of the vendor tool may take before it is SIGKILLed and answered as an error: a healthy
 * nvidia-smi answers in well under a second, one stuck in the driver never does.
 */
export const GPU_TOOL_TIMEOUT_MS = 10_000;

/**
 * The GPU memory adapter for `vendor`, one read at a time (see singleFlight); `binary` replaces the vendor
 * tool (HARU_GPU_SMI). Its per-process pids are put into the supervisor's PID namespace (see
 * createPidTranslator; `hostProc` is HARU_HOST_PROC).
 */
export function createGpuReader(opts: {
  vendor: 'nvidia' | 'amd';
  exec: Exec;
  binary?: string;
  /** Default GPU_TOOL_TIMEOUT_MS. */
  timeoutMs?: number;
  mig?: readonly MigSlot[];
  hostProc?: string;
  /** This namespace's /proc (tests). */
  proc?: string;
}): SharedGpuReader {
  const tool = { ...opts, timeoutMs: opts.timeoutMs ?? GPU_TOOL_TIMEOUT_MS };
  const reader = opts.vendor === 'amd' ? createAmdReader(tool) : createNvidiaReader(tool);
  const translator = createPidTranslator({ proc: opts.proc, hostProc: opts.hostProc });
  return singleFlight({
    vendor: reader.vendor,
    async checkConfig() {
      try {
        translator();
      } catch (err) {
        throw new ConfigError((err as Error).message);
      }
      await reader.checkConfig();
    },
    read: async () => inPidSpace(await reader.read(), translator()),
  });
}
