import type { GpuMemoryReader, GpuReading } from './types';

/**
 * One read of the vendor tool at a time: callers that arrive while a read is in flight share it. Each run of
 * the tool is bounded by its timeout, and a tool stuck past its SIGKILL blocks further runs (see
 * createExecFileTool), so reads never pile up behind a hung tool.
 */
export function singleFlight(reader: GpuMemoryReader): GpuMemoryReader {
  let shared: Promise<GpuReading[]> | null = null;
  return {
    vendor: reader.vendor,
    checkConfig: () => reader.checkConfig(),
    read() {
      shared ??= reader.read().finally(() => (shared = null));
      return shared;
    },
  };
}
