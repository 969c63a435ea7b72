import { execFile } from 'node:child_process';
import type { Exec } from './types';

/**
 * The real Exec: execFile without a shell, killed (SIGKILL) after `timeoutMs`, output capped at 4 MiB.
 * `env` replaces the inherited environment when given.
 */
export function createExecFileTool(opts: { env?: NodeJS.ProcessEnv } = {}): Exec {
  return (file, args, { timeoutMs }) =>
    new Promise((resolve, reject) => {
      execFile(
        file,
        args,
        { timeout: timeoutMs, killSignal: 'SIGKILL', maxBuffer: 4 * 1024 * 1024, encoding: 'utf8', env: opts.env },
        (err, stdout, stderr) => {
          if (!err) return resolve({ code: 0, signal: null, stdout, stderr });
          const e = err as NodeJS.ErrnoException & { code?: number | string; signal?: string | null; killed?: boolean };
          if (typeof e.code === 'string') return reject(err); // ENOENT, EACCES, ...: never ran
          resolve({
            code: typeof e.code === 'number' ? e.code : null,
            signal: e.signal ?? (e.killed ? 'SIGKILL' : null),
            stdout,
            stderr,
          });
        },
      );
    });
}

/** The real Exec with the inherited environment. */
export const execFileTool: Exec = createExecFileTool();
