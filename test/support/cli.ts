/** Runs `haru` as a child process, the way an operator does, and collects what it printed. */
import { execFile } from 'node:child_process';
import path from 'node:path';

const ROOT = path.resolve(__dirname, '..', '..');

/** What one `haru` run printed and its exit status. */
export interface CliRun {
  code: number;
  stdout: string;
  stderr: string;
}

/** `node bin/haru.js ...args` in the repository root with `env` added to this process's environment. */
export function runCli(args: string[], env: NodeJS.ProcessEnv = {}, timeoutMs = 60_000): Promise<CliRun> {
  return new Promise((resolve) => {
    execFile(
      process.execPath,
      [path.join(ROOT, 'bin', 'haru.js'), ...args],
      { cwd: ROOT, env: { ...process.env, ...env }, timeout: timeoutMs },
      (err, stdout, stderr) =>
        resolve({ code: err ? Number((err as { code?: number }).code ?? 1) : 0, stdout, stderr }),
    );
  });
}
