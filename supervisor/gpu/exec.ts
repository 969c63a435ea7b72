import { spawn } from 'node:child_process';
import { type Exec, type ExecResult, GpuQueryError } from './types';

const MAX_OUTPUT = 4 * 1024 * 1024;

/**
 * The real Exec: runs `file` without a shell, output capped at 4 MiB, SIGKILLed after `timeoutMs`; it then
 * answers at once (timed out) without waiting for the process. A tool still not finished after its SIGKILL
 * (nvidia-smi stuck in the kernel on a GPU off the bus or on a process in D state: SIGKILL cannot end it) is
 * remembered, and until it finishes another run of the same tool is refused with a GpuQueryError saying so,
 * instead of piling up more stuck processes. `env` replaces the inherited environment when given.
 */
export function createExecFileTool(opts: { env?: NodeJS.ProcessEnv } = {}): Exec {
  /** Per tool, the runs killed but not finished: pid -> when killed. */
  const unfinished = new Map<string, Map<number, number>>();
  return (file, args, { timeoutMs }) =>
    new Promise((resolve, reject) => {
      const [stuck] = unfinished.get(file) ?? [];
      if (stuck) {
        const [pid, killedAt] = stuck;
        const forS = Math.round((Date.now() - killedAt) / 1000);
        reject(
          new GpuQueryError(
            [file, ...args].join(' '),
            `not started: an earlier ${file} (pid ${pid}) has not finished ${forS} s after its SIGKILL (hung in the driver: a GPU off the bus or a process in D state)`,
          ),
        );
        return;
      }
      const child = spawn(file, args, { env: opts.env, stdio: ['ignore', 'pipe', 'pipe'] });
      let stdout = '';
      let stderr = '';
      child.stdout.setEncoding('utf8').on('data', (c: string) => stdout.length < MAX_OUTPUT && (stdout += c));
      child.stderr.setEncoding('utf8').on('data', (c: string) => stderr.length < MAX_OUTPUT && (stderr += c));
      let answered = false;
      const answer = (result: ExecResult) => {
        if (answered) return;
        answered = true;
        clearTimeout(timer);
        resolve(result);
      };
      const timer = setTimeout(() => {
        child.kill('SIGKILL');
        if (!unfinished.has(file)) unfinished.set(file, new Map());
        unfinished.get(file)!.set(child.pid ?? 0, Date.now());
        answer({ code: null, signal: 'SIGKILL', stdout, stderr, timedOut: true });
      }, timeoutMs);
      child.once('error', (err) => {
        clearTimeout(timer);
        if (!answered) {
          answered = true;
          reject(err); // ENOENT, EACCES, ...: never ran
        }
      });
      // 'close': the process has exited and its output is closed, also by any child it left holding it.
      child.once('close', (code, signal) => {
        const killed = unfinished.get(file);
        killed?.delete(child.pid ?? 0);
        if (killed?.size === 0) unfinished.delete(file);
        answer({ code, signal, stdout, stderr });
      });
    });
}

/** The real Exec with the inherited environment. */
export const execFileTool: Exec = createExecFileTool();
