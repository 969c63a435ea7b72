import type { GpuMemory } from '../../schemas/supervisor';

/** Result of running a command: never rejects for a non-zero exit (the adapter decides). */
export interface ExecResult {
  /** Exit code; null when the process was killed by a signal (or timed out). */
  code: number | null;
  signal: string | null;
  stdout: string;
  stderr: string;
  /** Set when it was killed for running past its timeout. */
  timedOut?: boolean;
}

/**
 * Runs `file` with `args` (no shell) and resolves with its output. Rejects only when the command cannot be
 * started at all (e.g. ENOENT). Injected so tests can feed real-format output without a GPU.
 */
export type Exec = (file: string, args: string[], opts: { timeoutMs: number }) => Promise<ExecResult>;

/** What a vendor tool tells about one GPU (the supervisor adds the models configured on it). */
export type GpuReading = Omit<GpuMemory, 'models'>;

/** Reads GPU memory from the vendor's tool. */
export interface GpuMemoryReader {
  readonly vendor: 'nvidia' | 'amd';
  /** Every GPU with used/total MiB and per-process usage. Throws GpuQueryError, never returns a guessed zero. */
  read(): Promise<GpuReading[]>;
  /** Refuses (ConfigError naming the field) configuration the host contradicts, e.g. a MIG device it lacks. */
  checkConfig(): Promise<void>;
}

/**
 * The reader the supervisor serves `/v1/gpu/memory` from (singleFlight): one run of the tool at a time, and a
 * reading at most `maxAgeMs` old reused when the caller says so. `ageMs` is how long ago the tool finished it.
 */
export interface SharedGpuReader {
  readonly vendor: GpuMemoryReader['vendor'];
  checkConfig(): Promise<void>;
  read(opts?: { maxAgeMs?: number; startedSinceMs?: number }): Promise<{ gpus: GpuReading[]; ageMs: number }>;
}

/** Most of a tool's stderr we keep in an error message. */
export const MAX_STDERR_CHARS = 500;

/** A vendor tool failed, timed out, or printed something we cannot parse. The message names the command. */
export class GpuQueryError extends Error {
  constructor(
    readonly command: string,
    reason: string,
    readonly stderr = '',
  ) {
    const capped = stderr.trim().slice(0, MAX_STDERR_CHARS);
    super(`\`${command}\` ${reason}${capped ? `: ${capped}` : ''}`);
    this.name = 'GpuQueryError';
  }
}

/** Runs a vendor tool and returns its stdout, or throws GpuQueryError for a failure to start or a non-zero exit. */
export async function runTool(exec: Exec, file: string, args: string[], timeoutMs: number): Promise<string> {
  const command = [file, ...args].join(' ');
  let result: ExecResult;
  try {
    result = await exec(file, args, { timeoutMs });
  } catch (err) {
    if (err instanceof GpuQueryError) throw err;
    throw new GpuQueryError(command, `could not be run (${(err as Error).message})`);
  }
  if (result.code !== 0) {
    const how = result.timedOut
      ? `did not answer within ${timeoutMs} ms and was killed (a GPU off the bus or a process in D state hangs nvidia-smi)`
      : result.code === null
        ? `was killed (${result.signal ?? 'timeout'})`
        : `exited with code ${result.code}`;
    // nvidia-smi prints driver errors on stdout, so fall back to it when stderr is empty.
    throw new GpuQueryError(command, how, result.stderr.trim() ? result.stderr : result.stdout);
  }
  return result.stdout;
}
