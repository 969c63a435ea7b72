/**
 * The supervisor on an AMD host: the fake rocm-smi (sim/bin/rocm-smi, rocm_smi.py's output) and a real trainer
 * process. The per-process VRAM names the trainer while it runs and not once it is stopped.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import path from 'node:path';
import { judgeGpu } from '../../core/gpu-release';
import { gpuMemoryReportSchema, supervisorStatusSchema } from '../../schemas/supervisor';
import { writeInventory } from '../../sim/gpu-state';
import { FAKE_ROCM_SMI, REPO_ROOT, tempDirs, TRAINER, waitFor } from './support';

const dirs = tempDirs();
const children: ChildProcess[] = [];
afterAll(async () => {
  for (const child of children) {
    const exited = new Promise((resolve) => child.once('exit', resolve));
    child.kill('SIGTERM'); // it stops its training runs first
    await exited;
  }
  dirs.cleanup();
});

it('proves by rocm-smi --showpids that the stopped trainer holds no VRAM', async () => {
  const dir = dirs.make();
  const gpuState = path.join(dir, 'gpu');
  writeInventory(gpuState, {
    gpus: [0, 1].map((index) => ({ index, uuid: `card${index}`, name: 'MI300X', totalMiB: 196_592 })),
    mig: null,
    baselineMiB: 10,
    fault: null,
  });
  const config = {
    training: [
      {
        gpuIndex: 1,
        command: [process.execPath, TRAINER, '--interval-ms', '30', '--vram-mib', '30000'],
        checkpointDir: path.join(dir, 'ckpt'),
        env: { HARU_SIM_GPU_STATE: gpuState },
      },
    ],
  };
  // A process: the vendor tool runs with the supervisor's own environment.
  const sup = spawn(process.execPath, ['-r', require.resolve('tsx/cjs'), path.join(REPO_ROOT, 'supervisor/main.ts')], {
    env: {
      PATH: process.env.PATH,
      HARU_SUPERVISOR_CONFIG: JSON.stringify(config),
      PORT: '0',
      HARU_GPU_VENDOR: 'amd',
      HARU_GPU_SMI: FAKE_ROCM_SMI,
      HARU_SIM_GPU_STATE: gpuState,
      // Not a test of tracking: train on a test machine without a cgroup to give runs too.
      HARU_TRAINING_ALLOW_PGROUP: '1',
    },
    stdio: ['ignore', 'pipe', 'ignore'],
  });
  children.push(sup);
  let out = '';
  sup.stdout.on('data', (c: Buffer) => (out += c.toString()));
  const port = await waitFor('the supervisor to listen', () => /"port":(\d+)/.exec(out)?.[1]);
  const base = `http://127.0.0.1:${port}`;
  const memory = async () =>
    gpuMemoryReportSchema.parse(await (await fetch(`${base}/v1/gpu/memory`)).json()).gpus.find((g) => g.index === 1)!;
  await fetch(`${base}/v1/training/start`, { method: 'POST' });
  const busy = await waitFor('the trainer on card1', async () => {
    const gpu = await memory();
    return gpu.processes.length > 0 && gpu;
  });
  const status = supervisorStatusSchema.parse(await (await fetch(`${base}/v1/status`)).json());
  const pid = status.training[0]!.pids[0]!;
  expect(busy).toMatchObject({
    uuid: 'card1',
    usedMiB: 30_010,
    totalMiB: 196_592,
    processes: [{ pid, usedMiB: 30_000 }],
  });
  expect(judgeGpu(busy, [pid], 0.1).problems).toContain(`GPU 1: trainer pid ${pid} still holds 30000 MiB`);

  await fetch(`${base}/v1/training/stop`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ graceMs: 5_000 }),
  });
  const released = await waitFor('the VRAM released', async () => {
    const gpu = await memory();
    return gpu.processes.length === 0 && gpu;
  });
  expect(released).toMatchObject({ usedMiB: 10, processes: [] });
  expect(judgeGpu(released, [pid], 0.1).problems).toEqual([]);
});
