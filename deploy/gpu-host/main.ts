/**
 * The GPU-host image's entrypoint (deploy/gpu-host/Dockerfile): runs the supervisor and every vLLM server of
 * the supervisor config in the order the systemd units use, for hosts without systemd.
 *
 *   node -r tsx/cjs deploy/gpu-host/main.ts
 *
 * The supervisor starts first and independently; each GPU's vLLM servers start one after another, each ready
 * (`/health` answers) before the next loads, GPUs in parallel. Each server is started by
 * examples/vllm-launch.sh with its environment file (HARU_VLLM_ENV_DIR, default /etc/haru/vllm). When any
 * process exits, or a server is not ready in time, the rest are stopped and this exits 1, so the container's
 * restart policy starts the host afresh. SIGTERM/SIGINT stops everything (the supervisor stops its training
 * runs within its grace) and exits 0.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { z } from 'zod';
import { ConfigError, parseEnv } from '../../schemas/env';
import { loadSupervisorConfig, loadSupervisorEnv } from '../../supervisor/config';
import { SUPERVISOR_SECRET_ENV } from '../../supervisor/training-env';
import { createJsonLogger } from '../../lib/logger';
import { planHost, type VllmServerPlan } from './plan';

const ROOT = path.resolve(__dirname, '../..');

/**
 * The image's own variables (deploy/README.md, "The GPU-host image"); the supervisor's are its own schema's
 * (supervisor/config.ts), read from the same environment.
 */
export const gpuHostEnvSchema = z.object({
  /** Where each vLLM server's environment file (`NAME.env`) is. */
  HARU_VLLM_ENV_DIR: z.string().min(1).default('/etc/haru/vllm'),
  /** How long one server may take to load (download included) before the host gives up. */
  HARU_VLLM_READY_TIMEOUT_S: z.coerce.number().int().positive().default(1800),
  /** How long stopping waits for every process before it kills what is left. */
  HARU_HOST_STOP_TIMEOUT_S: z.coerce.number().int().positive().default(60),
});

interface Running {
  label: string;
  child: ChildProcess;
  exited: Promise<void>;
}

/** Runs the host until a process exits (exit 1) or a signal stops it (exit 0). */
export async function runHost(env: NodeJS.ProcessEnv): Promise<never> {
  const logger = createJsonLogger({ write: (line) => process.stdout.write(line), base: { component: 'gpu-host' } });
  const settings = parseEnv(gpuHostEnvSchema, env, 'GPU host');
  const supervisorEnv = loadSupervisorEnv(env);
  const config = loadSupervisorConfig(supervisorEnv.HARU_SUPERVISOR_CONFIG, (file) => readFileSync(file, 'utf8'));
  const plan = planHost(config, (name) => readFileSync(path.join(settings.HARU_VLLM_ENV_DIR, `${name}.env`), 'utf8'));

  const running: Running[] = [];
  const waiters = new Set<ChildProcess>();
  let stopping = false;
  const start = (label: string, command: string, args: string[], childEnv: NodeJS.ProcessEnv) => {
    const child = spawn(command, args, { cwd: ROOT, env: childEnv, stdio: 'inherit' });
    const exited = new Promise<void>((resolve) =>
      child.once('exit', (code, signal) => {
        if (!stopping) logger.error('process exited: stopping the host', { process: label, code, signal });
        void stop(1);
        resolve();
      }),
    );
    child.once('error', (err) => logger.error('cannot start process', { process: label, error: err.message }));
    running.push({ label, child, exited });
    return exited;
  };
  const stop = async (code: number) => {
    if (stopping) return;
    stopping = true;
    for (const w of waiters) w.kill('SIGTERM');
    for (const r of running) if (r.child.exitCode === null && r.child.signalCode === null) r.child.kill('SIGTERM');
    const timeout = setTimeout(() => {
      for (const r of running) r.child.kill('SIGKILL');
    }, settings.HARU_HOST_STOP_TIMEOUT_S * 1000);
    await Promise.all(running.map((r) => r.exited));
    clearTimeout(timeout);
    logger.info('host stopped', { code });
    process.exit(code);
  };
  for (const signal of ['SIGTERM', 'SIGINT'] as const) process.once(signal, () => void stop(0));

  // A process's exit is handled inside start() (it stops the host); nothing waits for it here.
  void start('supervisor', process.execPath, [path.join(ROOT, 'bin/haru.js'), 'supervisor'], env);
  // The supervisor's tokens are its own: vLLM gets neither them nor the supervisor's settings.
  const vllmEnv: NodeJS.ProcessEnv = { ...env };
  for (const key of SUPERVISOR_SECRET_ENV) delete vllmEnv[key];
  const waitReady = (server: VllmServerPlan) =>
    new Promise<boolean>((resolve) => {
      const url = `http://127.0.0.1:${server.port}/health`;
      const waiter = spawn(
        process.execPath,
        [path.join(ROOT, 'deploy/bin/wait-http.js'), url, String(settings.HARU_VLLM_READY_TIMEOUT_S)],
        { stdio: ['ignore', 'ignore', 'inherit'] },
      );
      waiters.add(waiter);
      waiter.once('exit', (code) => {
        waiters.delete(waiter);
        resolve(code === 0);
      });
    });
  const startGpu = async (servers: VllmServerPlan[]) => {
    for (const server of servers) {
      if (stopping) return;
      logger.info('starting vLLM server', { model: server.name, gpuIndex: server.gpuIndex, port: server.port });
      void start(
        `vllm ${server.name}`,
        path.join(ROOT, 'examples/vllm-launch.sh'),
        [String(server.gpuIndex), String(server.port), server.name, server.model, ...server.args],
        { ...vllmEnv, ...server.env },
      );
      if (!(await waitReady(server))) {
        if (!stopping) logger.error('vLLM server not ready in time: stopping the host', { model: server.name });
        void stop(1);
        return;
      }
      logger.info('vLLM server ready', { model: server.name, gpuIndex: server.gpuIndex, port: server.port });
    }
  };
  await Promise.all(plan.gpus.map((gpu) => startGpu(gpu.servers)));
  return new Promise<never>(() => {});
}

if (require.main === module) {
  runHost(process.env).catch((err: Error) => {
    process.stderr.write(`${err instanceof ConfigError ? err.message : (err.stack ?? err.message)}\n`);
    process.exit(err instanceof ConfigError ? 2 : 1);
  });
}
