/**
 * The original project's supervisor routes, `GET /v1/ready` and `GET /v1/training/status`, served by Haru's
 * supervisor as aliases of `/v1/status` (supervisor/legacy-routes.ts): a fake vLLM, the fake trainer, real HTTP.
 */
import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import { silentLogger } from '../../lib/logger';
import { type SupervisorConfig, supervisorStatusSchema } from '../../schemas/supervisor';
import { writeInventory } from '../../sim/gpu-state';
import { createFakeVllm, type FakeVllm } from '../../sim/vllm/server';
import { createApp } from '../../supervisor/app';
import { createExecFileTool, createGpuReader } from '../../supervisor/gpu';
import { createListenerTable } from '../../supervisor/listeners';
import { createSupervisorMetrics } from '../../supervisor/metrics';
import { createProcessTable } from '../../supervisor/process-group';
import { createObservedInference } from '../../supervisor/status-view';
import { createTrainingManager, type TrainingManager } from '../../supervisor/training';
import { createVllmClient } from '../../supervisor/vllm';
import { FAKE_NVIDIA_SMI, tempDirs, TRAINER, waitFor } from './support';

const TOKEN = 'supervisor-legacy-token-0123456789';
const dirs = tempDirs();
let model: FakeVllm;
let training: TrainingManager;
let server: Server;
let base: string;

async function get(route: string, authorization = `Bearer ${TOKEN}`) {
  const res = await fetch(`${base}${route}`, { headers: { authorization } });
  return { status: res.status, json: (await res.json()) as unknown };
}
const post = (route: string, body: unknown) =>
  fetch(`${base}${route}`, {
    method: 'POST',
    headers: { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json' },
    body: JSON.stringify(body),
  }).then(async (res) => ({ status: res.status, json: (await res.json()) as unknown }));
const status = async () => supervisorStatusSchema.parse((await get('/v1/status')).json);

beforeAll(async () => {
  const dir = dirs.make();
  const gpuStateDir = path.join(dir, 'gpu');
  writeInventory(gpuStateDir, {
    gpus: [{ index: 0, uuid: 'GPU-00000000-0000-4000-8000-000000000000', name: 'NVIDIA L4', totalMiB: 23034 }],
    mig: null,
    baselineMiB: 4,
    fault: null,
  });
  model = createFakeVllm({
    model: 'chat-small',
    port: 0,
    gpuIndex: 0,
    gpuStateDir,
    tokensPerSecond: 10_000,
    onCrash: () => {},
  });
  const config: SupervisorConfig = {
    inference: [{ gpuIndex: 0, sleepLevel: 1, models: [{ name: 'chat-small', port: await model.listen() }] }],
    training: [
      {
        gpuIndex: 0,
        command: [process.execPath, TRAINER, '--interval-ms', '50', '--vram-mib', '1000'],
        checkpointDir: path.join(dir, 'ckpt0'),
        env: { HARU_SIM_GPU_STATE: gpuStateDir },
      },
    ],
  };
  const vllm = createVllmClient({ timeoutMs: 20_000, wakeTimeoutMs: 30_000 });
  const now = () => new Date();
  training = createTrainingManager({
    slots: config.training,
    baseEnv: { ...process.env },
    cwd: dir,
    processTable: createProcessTable(),
    now,
    logger: silentLogger,
    orphanGraceMs: 1_000,
    pollMs: 20,
  });
  const listeners = createListenerTable();
  const app = createApp({
    token: TOKEN,
    ...createObservedInference({ config, vllm, logger: silentLogger, listeners, now, slowMs: 1_000 }),
    training,
    config,
    listeners,
    gpu: createGpuReader({
      vendor: 'nvidia',
      exec: createExecFileTool({ env: { ...process.env, HARU_SIM_GPU_STATE: gpuStateDir } }),
      binary: FAKE_NVIDIA_SMI,
      timeoutMs: 10_000,
    }),
    vllm,
    metrics: createSupervisorMetrics({ trainingStatus: () => training.status() }),
    logger: silentLogger,
    now,
    defaultStopGraceMs: 5_000,
  });
  server = await new Promise<Server>((resolve) => {
    const s = app.listen(0, '127.0.0.1', () => resolve(s));
  });
  base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});

afterAll(async () => {
  await training?.stopAll(0);
  await new Promise<void>((resolve) => server?.close(() => resolve()));
  server?.closeAllConnections();
  await model?.close();
  dirs.cleanup();
});

describe("the original supervisor's routes", () => {
  it.each(['/v1/ready', '/v1/training/status'])('%s needs the bearer token, as every /v1 route', async (route) => {
    for (const authorization of ['', `Bearer ${TOKEN}x`]) {
      expect(await get(route, authorization)).toEqual({
        status: 401,
        json: { error: { code: 'unauthorized', message: expect.any(String) } },
      });
    }
  });

  it('GET /v1/ready answers 200 {ready}: true with every model awake, false (still 200) once one sleeps', async () => {
    expect(await waitFor('ready', async () => ((await get('/v1/ready')).json as { ready: boolean }).ready)).toBe(true);
    expect(await get('/v1/ready')).toEqual({ status: 200, json: { ready: true } });
    await post('/v1/vllm/sleep', { gpuIndex: 0 });
    expect(await get('/v1/ready')).toEqual({ status: 200, json: { ready: false } });
    expect((await status()).models[0]!.state).toBe('asleep');
  });

  it('GET /v1/training/status answers {slots: [{gpuIndex, state, pids}]}, the training runs of /v1/status', async () => {
    expect(await get('/v1/training/status')).toEqual({
      status: 200,
      json: { slots: [{ gpuIndex: 0, state: 'idle', pids: [] }] },
    });
    // The engine on GPU 0 sleeps (the test above), so training may start there.
    expect((await post('/v1/training/start', {})).json).toMatchObject({ accepted: true });
    const running = await waitFor('a running trainer', async () => {
      const t = (await status()).training[0]!;
      return t.state === 'running' && t.pids.length > 0 && t;
    });
    expect(await get('/v1/training/status')).toEqual({
      status: 200,
      json: { slots: [{ gpuIndex: 0, state: 'running', pids: running.pids }] },
    });
    await post('/v1/training/stop', { graceMs: 5_000 });
    await waitFor('training idle', async () => (await status()).training[0]!.state === 'idle');
    expect((await get('/v1/training/status')).json).toEqual({ slots: [{ gpuIndex: 0, state: 'idle', pids: [] }] });
  });
});
