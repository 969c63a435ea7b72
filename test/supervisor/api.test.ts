/**
 * The supervisor's HTTP API against fake vLLM servers (sim/vllm), the fake nvidia-smi and the fake trainer:
 * real HTTP, real processes, real signals.
 */
import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import {
  gpuMemoryReportSchema,
  probeResponseSchema,
  supervisorActionResponseSchema,
  type SupervisorConfig,
  supervisorStatusSchema,
} from '../../schemas/supervisor';
import { updateInventory, writeInventory } from '../../sim/gpu-state';
import { createFakeVllm, type FakeVllm } from '../../sim/vllm/server';
import { createApp } from '../../supervisor/app';
import { createExecFileTool, createGpuReader } from '../../supervisor/gpu';
import { createObservedInference } from '../../supervisor/status-view';
import { silentLogger } from '../../lib/logger';
import { createListenerTable } from '../../supervisor/listeners';
import { createSupervisorMetrics } from '../../supervisor/metrics';
import { createProcessTable } from '../../supervisor/process-group';
import { createTrainingManager, type TrainingManager } from '../../supervisor/training';
import { createVllmClient } from '../../supervisor/vllm';
import { FAKE_NVIDIA_SMI, tempDirs, TRAINER, waitFor } from './support';

const TOKEN = 'supervisor-test-token-0123456789';
const dirs = tempDirs();
let gpuStateDir: string;
let small: FakeVllm;
let large: FakeVllm;
let training: TrainingManager;
let server: Server;
let base: string;

async function call(method: string, route: string, body?: unknown, headers: Record<string, string> = {}) {
  const res = await fetch(`${base}${route}`, {
    method,
    headers: {
      authorization: `Bearer ${TOKEN}`,
      ...(body === undefined ? {} : { 'content-type': 'application/json' }),
      ...headers,
    },
    body: body === undefined ? undefined : typeof body === 'string' ? body : JSON.stringify(body),
  });
  const text = await res.text();
  let json: unknown = null;
  try {
    json = JSON.parse(text);
  } catch {
    // not JSON (metrics text): callers read `text`
  }
  return { status: res.status, json, text };
}
const status = async () => supervisorStatusSchema.parse((await call('GET', '/v1/status')).json);
const modelState = async (name: string) => (await status()).models.find((m) => m.name === name)!.state;

beforeAll(async () => {
  const dir = dirs.make();
  gpuStateDir = path.join(dir, 'gpu');
  writeInventory(gpuStateDir, {
    gpus: [
      { index: 0, uuid: 'GPU-00000000-0000-4000-8000-000000000000', name: 'NVIDIA H100 80GB HBM3', totalMiB: 81559 },
      { index: 1, uuid: 'GPU-11111111-1111-4111-8111-111111111111', name: 'NVIDIA H100 80GB HBM3', totalMiB: 81559 },
    ],
    mig: null,
    baselineMiB: 4,
    fault: null,
  });
  const fake = (model: string, gpuIndex: number) =>
    createFakeVllm({ model, port: 0, gpuIndex, gpuStateDir, tokensPerSecond: 10_000, onCrash: () => {} });
  small = fake('small-a', 0);
  large = fake('large', 1);
  const [smallPort, largePort] = [await small.listen(), await large.listen()];
  const config: SupervisorConfig = {
    inference: [
      { gpuIndex: 0, sleepLevel: 1, models: [{ name: 'small-a', port: smallPort }] },
      { gpuIndex: 1, sleepLevel: 2, models: [{ name: 'large', port: largePort }] },
    ],
    training: [
      {
        gpuIndex: 0,
        command: [process.execPath, TRAINER, '--interval-ms', '50', '--vram-mib', '30000'],
        checkpointDir: path.join(dir, 'ckpt0'),
        env: { HARU_SIM_GPU_STATE: gpuStateDir },
      },
    ],
  };
  // Generous: a loaded CI machine must not turn a slow answer into a failed assertion.
  const vllm = createVllmClient({ timeoutMs: 20_000, wakeTimeoutMs: 30_000 });
  training = createTrainingManager({
    slots: config.training,
    baseEnv: { ...process.env, HARU_SUPERVISOR_TOKEN: TOKEN },
    cwd: dir,
    processTable: createProcessTable(),
    now: () => new Date(),
    logger: silentLogger,
    orphanGraceMs: 1_000,
    pollMs: 20,
  });
  const app = createApp({
    token: TOKEN,
    ...createObservedInference({
      config: config,
      vllm,
      logger: silentLogger,
      listeners: createListenerTable(),
      now: () => new Date(),
      slowMs: 1_000,
    }),
    training,
    config,
    listeners: createListenerTable(),
    gpu: createGpuReader({
      vendor: 'nvidia',
      exec: createExecFileTool({ env: { ...process.env, HARU_SIM_GPU_STATE: gpuStateDir } }),
      binary: FAKE_NVIDIA_SMI,
      timeoutMs: 10_000,
    }),
    vllm,
    metrics: createSupervisorMetrics({ trainingStatus: () => training.status() }),
    logger: silentLogger,
    now: () => new Date(),
    defaultStopGraceMs: 5_000,
  });
  server = await new Promise<Server>((resolve) => {
    const s = app.listen(0, '127.0.0.1', () => resolve(s));
  });
  base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});

afterEach(async () => {
  await small.setFaults(null);
  await large.setFaults(null);
  updateInventory(gpuStateDir, { fault: null, mig: null, lost: [] });
  await training.stopAll(0);
});

afterAll(async () => {
  await training?.stopAll(0);
  await new Promise<void>((resolve) => server?.close(() => resolve()));
  server?.closeAllConnections();
  await small?.close();
  await large?.close();
  dirs.cleanup();
});

describe('supervisor API: auth and bodies', () => {
  // Every row has three entries: jest would take a missing third argument for a `done` callback.
  const routes: [string, string, unknown][] = [
    ['GET', '/v1/status', undefined],
    ['POST', '/v1/vllm/sleep', {}],
    ['POST', '/v1/vllm/wake', {}],
    ['POST', '/v1/training/start', {}],
    ['POST', '/v1/training/stop', { graceMs: 0 }],
    ['GET', '/v1/gpu/memory', undefined],
    ['POST', '/v1/probe', { prompt: 'hi', maxTokens: 4, timeoutMs: 1_000 }],
    ['GET', '/v1/no-such-route', undefined],
  ];

  it.each(routes)(
    'refuses %s %s without the bearer token, or with a wrong one, and changes nothing',
    async (method, route, body) => {
      for (const authorization of [
        '',
        `Bearer ${TOKEN}x`,
        `Basic ${Buffer.from(`u:${TOKEN}`).toString('base64')}`,
        'Bearer',
      ]) {
        const res = await call(method, route, body, { authorization });
        expect(res.status).toBe(401);
        expect(res.json).toEqual({ error: { code: 'unauthorized', message: expect.any(String) } });
      }
      expect(small.state().sleeping).toBe(false);
      expect(large.state().sleeping).toBe(false);
      expect(training.status()[0]!.state).toBe('idle');
    },
  );

  it('keeps /healthz and /metrics open', async () => {
    const health = await call('GET', '/healthz', undefined, { authorization: '' });
    expect(health).toMatchObject({ status: 200, json: { status: 'ok' } });
    const metrics = await call('GET', '/metrics', undefined, { authorization: '' });
    expect(metrics.status).toBe(200);
    expect(metrics.text).toContain('haru_supervisor_http_requests_total');
    expect(metrics.text).toContain('haru_supervisor_training_running{gpu="0"} 0');
  });

  it.each([
    ['/v1/vllm/sleep', { level: 1, extra: true }],
    ['/v1/vllm/sleep', { level: 3 }],
    ['/v1/vllm/wake', { gpuIndex: -1 }],
    ['/v1/training/start', { gpuIndex: 0, command: ['rm', '-rf', '/'] }],
    ['/v1/training/stop', { graceMs: -5 }],
    ['/v1/probe', { maxTokens: 4, timeoutMs: 1_000 }],
    ['/v1/probe', { prompt: 'hi', maxTokens: 4, timeoutMs: 1_000, temperature: 1 }],
    ['/v1/vllm/sleep', '{"level": 1'],
    ['/v1/vllm/sleep', '"sleep"'],
  ])('answers 400 invalid_request for a bad body on %s (%j) and does nothing', async (route, body) => {
    const res = await call('POST', route, body);
    expect(res.status).toBe(400);
    expect(res.json).toEqual({ error: { code: 'invalid_request', message: expect.any(String) } });
    expect(small.state().calls).not.toContain('POST /sleep?level=1');
    expect(training.status()[0]!.state).toBe('idle');
  });

  it('answers 404 for a GPU without a slot of the asked kind', async () => {
    for (const [route, body] of [
      ['/v1/vllm/sleep', { gpuIndex: 7 }],
      ['/v1/training/start', { gpuIndex: 1 }],
    ] as const) {
      const res = await call('POST', route, body);
      expect(res.status).toBe(404);
      expect(res.json).toMatchObject({ error: { code: 'not_found' } });
    }
  });
});

describe('supervisor API: vLLM sleep and wake', () => {
  it('sleeps every model at its slot level and wakes it, proving each state by re-reading it', async () => {
    const slept = supervisorActionResponseSchema.parse((await call('POST', '/v1/vllm/sleep', {})).json);
    expect(slept).toEqual({ accepted: true, gpuIndexes: [0, 1], errors: [] });
    expect((await status()).models.map((m) => [m.name, m.state])).toEqual([
      ['small-a', 'asleep'],
      ['large', 'asleep'],
    ]);
    expect(small.state().sleepLevel).toBe(1);
    expect(large.state().sleepLevel).toBe(2);

    const woke = supervisorActionResponseSchema.parse((await call('POST', '/v1/vllm/wake', {})).json);
    expect(woke).toEqual({ accepted: true, gpuIndexes: [0, 1], errors: [] });
    expect((await status()).models.map((m) => m.state)).toEqual(['awake', 'awake']);
    // Level 2 dropped the weights: reload them before the KV cache comes back, then reset the prefix cache.
    const largeCalls = large.state().calls.filter((c) => c.startsWith('POST'));
    expect(largeCalls.slice(largeCalls.indexOf('POST /sleep?level=2'))).toEqual([
      'POST /sleep?level=2',
      'POST /wake_up?tags=weights',
      'POST /collective_rpc',
      'POST /wake_up?tags=kv_cache',
      'POST /reset_prefix_cache',
    ]);
    expect(large.state().weightsValid).toBe(true);
    expect(small.state().calls).toContain('POST /wake_up');
  });

  it('resets the prefix cache after a level-1 wake too, retrying while vLLM answers {"success": false}', async () => {
    await call('POST', '/v1/vllm/sleep', { gpuIndex: 0 });
    await small.setFaults({ prefixResetFailures: 3 });
    const resetsBefore = small.state().prefixResets;
    const woke = supervisorActionResponseSchema.parse((await call('POST', '/v1/vllm/wake', { gpuIndex: 0 })).json);
    expect(woke).toEqual({ accepted: true, gpuIndexes: [0], errors: [] });
    const posts = small.state().calls.filter((c) => c.startsWith('POST'));
    expect(posts.slice(posts.lastIndexOf('POST /wake_up'))).toEqual([
      'POST /wake_up',
      ...Array.from({ length: 4 }, () => 'POST /reset_prefix_cache'),
    ]);
    expect(small.state().prefixResets).toBe(resetsBefore + 1);
  });

  it('reports a wake whose prefix cache never resets, and resets it on the repeated wake', async () => {
    await call('POST', '/v1/vllm/sleep', { gpuIndex: 0 });
    await small.setFaults({ prefixResetFailures: 1_000 });
    const first = supervisorActionResponseSchema.parse((await call('POST', '/v1/vllm/wake', { gpuIndex: 0 })).json);
    expect(first.accepted).toBe(false);
    expect(first.errors[0]!.message).toMatch(
      /small-a answered \{"success": false\} to POST \/reset_prefix_cache 20 times/,
    );
    const resetsBefore = small.state().prefixResets;
    await small.setFaults(null);
    const again = supervisorActionResponseSchema.parse((await call('POST', '/v1/vllm/wake', { gpuIndex: 0 })).json);
    expect(again).toEqual({ accepted: true, gpuIndexes: [0], errors: [] });
    expect(small.state().prefixResets).toBe(resetsBefore + 1);
  });

  it('sleeps with mode=wait where the vLLM reads it, letting a running request finish; else with the default', async () => {
    const lastSleep = () =>
      small
        .state()
        .calls.filter((c) => c.startsWith('POST /sleep'))
        .slice(-2);
    await small.setFaults({ tokensPerSecond: 50 });
    const pending = fetch(`http://127.0.0.1:${small.port}/v1/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'small-a', messages: [{ role: 'user', content: 'x' }], max_tokens: 10 }),
    }).then((r) => r.json() as Promise<{ choices: { finish_reason: string }[] }>);
    await waitFor('the request running', () => small.state().running === 1);
    const slept = await call('POST', '/v1/vllm/sleep', { gpuIndex: 0, mode: 'wait' });
    expect(slept.json).toEqual({ accepted: true, gpuIndexes: [0], errors: [] });
    expect((await pending).choices[0]!.finish_reason).toBe('length'); // finished, not aborted
    expect(lastSleep().at(-1)).toBe('POST /sleep?level=1&mode=wait');

    // An older vLLM ignores `mode` (it would abort): the supervisor does not pretend, it sends the plain sleep.
    await call('POST', '/v1/vllm/wake', { gpuIndex: 0 });
    await small.setFaults({ vllmVersion: '0.16.0' });
    expect((await call('POST', '/v1/vllm/sleep', { gpuIndex: 0, mode: 'wait' })).json).toMatchObject({
      accepted: true,
    });
    expect(lastSleep().at(-1)).toBe('POST /sleep?level=1');

    // An in-process engine refuses `wait` with a 500: slept with the default instead.
    await call('POST', '/v1/vllm/wake', { gpuIndex: 0 });
    await small.setFaults({ inprocEngine: true });
    expect((await call('POST', '/v1/vllm/sleep', { gpuIndex: 0, mode: 'wait' })).json).toMatchObject({
      accepted: true,
    });
    expect(lastSleep()).toEqual(['POST /sleep?level=1&mode=wait', 'POST /sleep?level=1']);
    expect(await modelState('small-a')).toBe('asleep');
    expect((await call('POST', '/v1/vllm/sleep', { mode: 'later' })).status).toBe(400);
    expect((await call('POST', '/v1/vllm/wake', { gpuIndex: 0 })).json).toMatchObject({ accepted: true });
  });

  it('acts on one GPU only when asked, with the requested level', async () => {
    const res = await call('POST', '/v1/vllm/sleep', { gpuIndex: 0, level: 2 });
    expect(res.json).toEqual({ accepted: true, gpuIndexes: [0], errors: [] });
    expect(small.state().sleepLevel).toBe(2);
    expect(await modelState('large')).toBe('awake');
    expect((await call('POST', '/v1/vllm/wake', { gpuIndex: 0 })).json).toMatchObject({ accepted: true });
    expect(await modelState('small-a')).toBe('awake');
    expect(small.state().calls).toContain('POST /collective_rpc'); // woke with the level-2 sequence
  });

  it('serialises overlapping wakes of one GPU: a retried wake waits for the first instead of interleaving', async () => {
    await call('POST', '/v1/vllm/sleep', { gpuIndex: 1 });
    const before = large.state().calls.length;
    const [a, b] = await Promise.all([
      call('POST', '/v1/vllm/wake', { gpuIndex: 1 }),
      call('POST', '/v1/vllm/wake', { gpuIndex: 1 }),
    ]);
    expect([a.json, b.json]).toEqual([
      { accepted: true, gpuIndexes: [1], errors: [] },
      { accepted: true, gpuIndexes: [1], errors: [] },
    ]);
    const posts = large
      .state()
      .calls.slice(before)
      .filter((c) => c.startsWith('POST'));
    expect(posts).toEqual([
      'POST /wake_up?tags=weights',
      'POST /collective_rpc',
      'POST /wake_up?tags=kv_cache',
      'POST /reset_prefix_cache',
    ]);
  });

  it('reports a sleep or wake that vLLM acknowledged with 200 but did not perform', async () => {
    await small.setFaults({ sleepNoop: true });
    const sleep = supervisorActionResponseSchema.parse((await call('POST', '/v1/vllm/sleep', { gpuIndex: 0 })).json);
    expect(sleep.accepted).toBe(false);
    expect(sleep.errors).toEqual([{ target: 'small-a', message: expect.stringMatching(/still reports awake/) }]);

    await small.setFaults({ wakeNoop: true });
    expect((await call('POST', '/v1/vllm/sleep', { gpuIndex: 0 })).json).toMatchObject({ accepted: true });
    const wake = supervisorActionResponseSchema.parse((await call('POST', '/v1/vllm/wake', { gpuIndex: 0 })).json);
    expect(wake.accepted).toBe(false);
    expect(wake.errors).toEqual([{ target: 'small-a', message: expect.stringMatching(/still reports sleeping/) }]);
    expect(await modelState('small-a')).toBe('asleep');
    await small.setFaults(null);
    expect((await call('POST', '/v1/vllm/wake', { gpuIndex: 0 })).json).toMatchObject({ accepted: true });
  });

  it('reports running requests from vLLM metrics and an unreachable server as unknown', async () => {
    await large.setFaults({ hang: true });
    const abort = new AbortController();
    const pending = fetch(`http://127.0.0.1:${large.port}/v1/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'large', messages: [{ role: 'user', content: 'hi' }] }),
      signal: abort.signal,
    }).catch(() => null);
    await waitFor('a running request', async () => (await status()).models[1]!.runningRequests === 1);
    expect((await status()).models[0]!.runningRequests).toBe(0);
    abort.abort();
    await pending;

    await large.setFaults({ refuse: true });
    const down = await waitFor('the refused server gone', async () => {
      const model = (await status()).models[1]!;
      return model.condition === 'gone' && model;
    });
    expect(down).toMatchObject({
      state: 'unknown',
      runningRequests: null,
      error: expect.stringMatching(/ECONNREFUSED/),
      processes: { pids: [] },
    });
  });
});

describe('supervisor API: probe', () => {
  const probe = async (body: Record<string, unknown>) => {
    const res = await call('POST', '/v1/probe', { prompt: 'Say hello.', maxTokens: 8, timeoutMs: 20_000, ...body });
    return { status: res.status, body: res.json };
  };

  it('passes every model that generates content', async () => {
    const res = await probe({});
    expect(res.status).toBe(200);
    expect(probeResponseSchema.parse(res.body).results).toEqual([
      { model: 'small-a', ok: true, latencyMs: expect.any(Number), error: null },
      { model: 'large', ok: true, latencyMs: expect.any(Number), error: null },
    ]);
  });

  it('fails a model that answers with empty content after a wake', async () => {
    await small.setFaults({ emptyContentAfterWake: true });
    await call('POST', '/v1/vllm/sleep', { gpuIndex: 0 });
    await call('POST', '/v1/vllm/wake', { gpuIndex: 0 });
    const { results } = probeResponseSchema.parse((await probe({})).body);
    expect(results[0]).toMatchObject({ model: 'small-a', ok: false, error: 'empty content' });
    expect(results[1]).toMatchObject({ model: 'large', ok: true });
  });

  it('fails a model that hangs, once the timeout passes', async () => {
    await large.setFaults({ hang: true });
    const { results } = probeResponseSchema.parse((await probe({ timeoutMs: 300, models: ['large'] })).body);
    expect(results).toEqual([
      {
        model: 'large',
        ok: false,
        latencyMs: expect.any(Number),
        error: expect.stringMatching(/timed out after 300 ms/),
      },
    ]);
  });

  it('fails a sleeping model once the timeout passes (vLLM queues it until a wake), and refuses unknown models', async () => {
    await call('POST', '/v1/vllm/sleep', { gpuIndex: 0 });
    const { results } = probeResponseSchema.parse((await probe({ models: ['small-a'], timeoutMs: 300 })).body);
    expect(results[0]).toMatchObject({ ok: false, error: expect.stringMatching(/timed out after 300 ms/) });
    await call('POST', '/v1/vllm/wake', { gpuIndex: 0 });

    const unknown = await probe({ models: ['small-a', 'nope'] });
    expect(unknown).toEqual({
      status: 404,
      body: { error: { code: 'model_not_found', message: expect.stringContaining('nope') } },
    });
  });
});

describe('supervisor API: training and GPU memory', () => {
  it('starts training that holds VRAM, stops it with 202, and the memory is released', async () => {
    // Training runs where the GPU's engines sleep (supervisor/gpu-exclusion.ts).
    await call('POST', '/v1/vllm/sleep', { gpuIndex: 0 });
    const resting = gpuMemoryReportSchema.parse((await call('GET', '/v1/gpu/memory')).json).gpus[0]!.usedMiB!;
    const start = await call('POST', '/v1/training/start', {});
    expect(start).toMatchObject({ status: 200, json: { accepted: true, gpuIndexes: [0], errors: [] } });
    const running = (await status()).training[0]!;
    expect(running).toMatchObject({ gpuIndex: 0, state: 'running', lastExit: null });
    const pid = running.pids[0]!;

    const held = await waitFor('trainer VRAM', async () => {
      const report = gpuMemoryReportSchema.parse((await call('GET', '/v1/gpu/memory')).json);
      // The per-GPU and per-process queries are two nvidia-smi calls: wait for a report in which both saw the trainer.
      const gpu = report.gpus[0]!;
      return gpu.processes.some((p) => p.pid === pid) && (gpu.usedMiB ?? 0) >= 30_000 && report;
    });
    expect(held.gpus[0]).toMatchObject({
      index: 0,
      totalMiB: 81559,
      processes: expect.arrayContaining([{ pid, usedMiB: 30000 }]),
    });
    expect(held.gpus[0]!.usedMiB).toBe(resting + 30000); // the sleeping engine's residue and the trainer

    const stop = await call('POST', '/v1/training/stop', { graceMs: 5_000 });
    expect(stop).toMatchObject({ status: 202, json: { accepted: true, gpuIndexes: [0] } });
    const stopped = await waitFor('training idle', async () => {
      const t = (await status()).training[0]!;
      return t.state === 'idle' && t;
    });
    expect(stopped).toMatchObject({ pids: [], lastExit: { code: 0, signal: null } });
    const after = gpuMemoryReportSchema.parse((await call('GET', '/v1/gpu/memory')).json);
    expect(after.gpus[0]!.processes.map((p) => p.pid)).not.toContain(pid);
    await call('POST', '/v1/vllm/wake', { gpuIndex: 0 });
  });

  it('answers a stop with waitMs once the trainer has ended, naming the processes it stopped', async () => {
    await call('POST', '/v1/vllm/sleep', { gpuIndex: 0 });
    await call('POST', '/v1/training/start', {});
    const pid = await waitFor('a running trainer', async () => (await status()).training[0]!.pids[0]);
    const stop = await call('POST', '/v1/training/stop', { gpuIndex: 0, graceMs: 5_000, waitMs: 10_000 });
    const answeredAt = Date.now();
    expect(stop).toMatchObject({
      status: 202,
      json: { accepted: true, gpuIndexes: [0], stopping: [{ gpuIndex: 0, pids: [pid] }] },
    });
    // Answered after the end (same clock: the supervisor runs in this process), and the status shows it over.
    const ended = (await status()).training[0]!;
    expect(ended).toMatchObject({ state: 'idle', pids: [], lastExit: { at: expect.any(String) } });
    expect(Date.parse(ended.lastExit!.at)).toBeLessThanOrEqual(answeredAt);
    // Nothing to stop: answered at once, stopping nothing.
    const idle = await call('POST', '/v1/training/stop', { gpuIndex: 0, waitMs: 10_000 });
    expect(idle).toMatchObject({ status: 202, json: { accepted: true, stopping: [] } });
    await call('POST', '/v1/vllm/wake', { gpuIndex: 0 });
  });

  it('reuses a GPU reading at most maxAgeMs old, with the time it was taken; refuses a bad maxAgeMs', async () => {
    const first = gpuMemoryReportSchema.parse((await call('GET', '/v1/gpu/memory')).json);
    const askedAt = await waitFor('a clock past the first reading', async () => {
      const t = Date.now();
      return t > Date.parse(first.at) && t;
    });
    const reused = gpuMemoryReportSchema.parse((await call('GET', '/v1/gpu/memory?maxAgeMs=5000')).json);
    expect(reused.gpus).toEqual(first.gpus);
    expect(Date.parse(reused.at)).toBeLessThan(askedAt); // taken before it was asked for: the earlier run
    const fresh = gpuMemoryReportSchema.parse((await call('GET', '/v1/gpu/memory')).json);
    expect(Date.parse(fresh.at)).toBeGreaterThanOrEqual(askedAt);
    for (const bad of ['abc', '-1', '5001', '1.5']) {
      const res = await call('GET', `/v1/gpu/memory?maxAgeMs=${bad}`);
      expect(res).toMatchObject({ status: 400, json: { error: { code: 'invalid_request' } } });
    }
  });

  it('refuses training beside an awake engine and a wake beside a trainer, naming why', async () => {
    const refused = await call('POST', '/v1/training/start', {});
    expect(refused).toMatchObject({
      status: 200,
      json: {
        accepted: false,
        errors: [
          { target: 'training/gpu0', message: 'small-a on GPU 0 is awake: refusing to start training beside it' },
        ],
      },
    });
    expect((await status()).training[0]).toMatchObject({ state: 'idle', pids: [] });

    await call('POST', '/v1/vllm/sleep', { gpuIndex: 0 });
    expect((await call('POST', '/v1/training/start', {})).json).toMatchObject({ accepted: true });
    const pid = (await status()).training[0]!.pids[0]!;
    const wake = await call('POST', '/v1/vllm/wake', { gpuIndex: 0 });
    expect(wake.json).toEqual({
      accepted: false,
      gpuIndexes: [0],
      errors: [
        {
          target: 'small-a',
          message: `training is running on GPU 0 (pids ${pid}): refusing to wake vLLM beside it`,
        },
      ],
    });
    expect((await status()).models.find((m) => m.name === 'small-a')).toMatchObject({ state: 'asleep' });
    await training.stopAll(0);
    expect((await call('POST', '/v1/vllm/wake', { gpuIndex: 0 })).json).toMatchObject({ accepted: true });
  });

  it('reports an unreadable GPU in the body (MIG without privilege, a lost GPU), and a failing tool as a 500', async () => {
    const mig = { gpuIndex: 0, gi: 1, ci: 0, uuid: 'MIG-c6d4f1ef-42e4-5de3-91c7-45d71c87eb3f', profile: '7g.80gb' };
    updateInventory(gpuStateDir, { mig: { privileged: false, instances: [{ ...mig, totalMiB: 81_000 }] }, lost: [1] });
    const res = await call('GET', '/v1/gpu/memory');
    expect(res.status).toBe(200);
    const report = gpuMemoryReportSchema.parse(res.json);
    expect(report.gpus.map((g) => [g.index, g.usedMiB, g.error?.kind])).toEqual([
      [0, null, 'permission'],
      [1, null, 'lost'],
    ]);
    expect(report.gpus[0]!.error!.message).toMatch(/^GPU 0 \(GPU-0{8}-.*training\[\]\.mig/);

    updateInventory(gpuStateDir, { mig: null, lost: [], fault: 'fail' });
    const failed = await call('GET', '/v1/gpu/memory');
    expect(failed.status).toBe(500);
    expect(failed.json).toEqual({
      error: {
        code: 'internal_error',
        message: expect.stringMatching(/nvidia-smi --query-.* exited with code 9: NVIDIA-SMI has failed/),
      },
    });

    updateInventory(gpuStateDir, { fault: 'garbage' });
    const garbage = await call('GET', '/v1/gpu/memory');
    expect(garbage.status).toBe(500);
    expect(garbage.text).toMatch(/unparseable line 1/);
  });
});
