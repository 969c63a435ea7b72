import { spawn } from 'node:child_process';

/** One command to run: a program and its arguments, never a shell line. */
export interface ExecRequest {
  /** The program, found on the PATH of `env` when it has no slash. */
  file: string;
  args: readonly string[];
  /** The child's whole environment (nothing is inherited implicitly). */
  env: Readonly<Record<string, string>>;
  /** Killed (SIGTERM, then SIGKILL after a grace) when it runs longer than this. */
  timeoutMs: number;
  /** Aborting kills the command the same way (an activity's cancellation signal). */
  signal?: AbortSignal;
  /** Called with every chunk of output as it arrives (heartbeats while a launch runs). */
  onOutput?: (chunk: string, stream: 'stdout' | 'stderr') => void;
  cwd?: string;
}

/** How a command ended. `exitCode` is null when it was killed by a signal. */
export interface ExecResult {
  exitCode: number | null;
  signal: NodeJS.Signals | null;
  /** The last `maxOutputBytes` of each stream (earlier output is dropped, never the end). */
  stdout: string;
  stderr: string;
  /** True when our timeout killed it. */
  timedOut: boolean;
  /** True when `signal` aborted it. */
  aborted: boolean;
  durationMs: number;
}

/** Runs a command. Rejects only when the program cannot be started (ENOENT, EACCES). */
export type Exec = (request: ExecRequest) => Promise<ExecResult>;

export interface SpawnExecOptions {
  /** SIGTERM-to-SIGKILL grace for a timed-out or aborted command (default 5 s). */
  killGraceMs?: number;
  /** Output kept per stream (default 1 MiB). */
  maxOutputBytes?: number;
}

/** Keeps the tail of a stream within a byte budget. */
class TailBuffer {
  private chunks: Buffer[] = [];
  private size = 0;
  constructor(private readonly max: number) {}
  push(chunk: Buffer): void {
    this.chunks.push(chunk);
    this.size += chunk.length;
    while (this.size > this.max && this.chunks.length > 1) this.size -= this.chunks.shift()!.length;
    if (this.size > this.max) {
      const only = this.chunks[0]!;
      this.chunks[0] = only.subarray(only.length - this.max);
      this.size = this.max;
    }
  }
  text(): string {
    return Buffer.concat(this.chunks).toString('utf8');
  }
}

/**
 * The real Exec: `child_process.spawn` without a shell, in its own process group so a timeout or an
 * abort also kills what the command started (the `sky` CLI runs helpers). stdin is closed, so a
 * command that would prompt fails instead of hanging.
 */
export function createSpawnExec(options: SpawnExecOptions = {}): Exec {
  const killGraceMs = options.killGraceMs ?? 5_000;
  const maxOutputBytes = options.maxOutputBytes ?? 1024 * 1024;
  return (request) =>
    new Promise<ExecResult>((resolve, reject) => {
      const started = Date.now();
      const child = spawn(request.file, [...request.args], {
        env: { ...request.env },
        cwd: request.cwd,
        shell: false,
        detached: true,
        stdio: ['ignore', 'pipe', 'pipe'],
      });
      const stdout = new TailBuffer(maxOutputBytes);
      const stderr = new TailBuffer(maxOutputBytes);
      let timedOut = false;
      let aborted = false;
      let killTimer: NodeJS.Timeout | undefined;
      let spawned = false;

      const killGroup = (sig: NodeJS.Signals) => {
        try {
          if (child.pid) process.kill(-child.pid, sig);
        } catch {
          // Already gone.
        }
      };
      const terminate = () => {
        killGroup('SIGTERM');
        killTimer ??= setTimeout(() => killGroup('SIGKILL'), killGraceMs);
      };
      const timeout = setTimeout(() => {
        timedOut = true;
        terminate();
      }, request.timeoutMs);
      const onAbort = () => {
        aborted = true;
        terminate();
      };
      if (request.signal?.aborted) onAbort();
      else request.signal?.addEventListener('abort', onAbort, { once: true });

      const cleanup = () => {
        clearTimeout(timeout);
        if (killTimer) clearTimeout(killTimer);
        request.signal?.removeEventListener('abort', onAbort);
      };
      child.stdout.on('data', (chunk: Buffer) => {
        stdout.push(chunk);
        request.onOutput?.(chunk.toString('utf8'), 'stdout');
      });
      child.stderr.on('data', (chunk: Buffer) => {
        stderr.push(chunk);
        request.onOutput?.(chunk.toString('utf8'), 'stderr');
      });
      child.once('spawn', () => {
        spawned = true;
      });
      child.once('error', (err) => {
        if (spawned) return; // a kill error after start; 'close' still reports the end
        cleanup();
        reject(err);
      });
      child.once('close', (exitCode, signal) => {
        cleanup();
        // The group may still hold helpers the command left behind; they are its to clean up, except when we killed it.
        if (timedOut || aborted) killGroup('SIGKILL');
        resolve({
          exitCode,
          signal,
          stdout: stdout.text(),
          stderr: stderr.text(),
          timedOut,
          aborted,
          durationMs: Date.now() - started,
        });
      });
    });
}
