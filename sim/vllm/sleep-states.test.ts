/**
 * The fake vLLM's sleep states as vLLM's own source has them: the sleep-state gauge after a partial wake
 * (vllm/v1/engine/async_llm.py), level 0 and `tags=scheduling` (vllm/v1/engine/core.py `sleep`, `wake_up`),
 * the first-sleep delay, the `/version` a supervisor reads, and the residue a sleeping engine leaves on its GPU
 * as the fake nvidia-smi reports it.
 */
import { execFile } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { writeInventory } from '../gpu-state';
import { eventually } from '../../test/support/eventually';
import { createFakeVllm, type FakeVllm, SIM_VLLM_VERSION } from './server';

const SMI = path.join(__dirname, '../bin/nvidia-smi');
const FIRST_SLEEP_DELAY_MS = 1_500;
let fake: FakeVllm;
let base: string;
let stateDir: string;

beforeAll(async () => {
  stateDir = mkdtempSync(path.join(os.tmpdir(), 'haru-fake-vllm-sleep-'));
  writeInventory(stateDir, {
    gpus: [{ index: 0, uuid: 'GPU-0', name: 'NVIDIA H100 80GB HBM3', totalMiB: 81559 }],
    mig: null,
    baselineMiB: 0,
    fault: null,
  });
  fake = createFakeVllm({
    model: 'm',
    port: 0,
    gpuIndex: 0,
    gpuStateDir: stateDir,
    tokensPerSecond: 5_000,
    weightsMiB: 14_000,
    kvCacheMiB: 6_000,
    residueMiB: 2_345,
    firstSleepDelayMs: FIRST_SLEEP_DELAY_MS,
    onCrash: () => {},
  });
  base = `http://127.0.0.1:${await fake.listen()}`;
});
afterEach(async () => {
  await fake.setFaults(null);
  if (fake.state().sleeping) await fetch(`${base}/wake_up`, { method: 'POST' });
});
afterAll(async () => {
  await fake.close();
  rmSync(stateDir, { recursive: true, force: true });
});

const post = (route: string) => fetch(`${base}${route}`, { method: 'POST' });
const isSleeping = async () =>
  ((await (await fetch(`${base}/is_sleeping`)).json()) as { is_sleeping: boolean }).is_sleeping;
const gauge = async () => {
  const text = await (await fetch(`${base}/metrics`)).text();
  const value = (state: string) =>
    Number(
      text
        .split('\n')
        .find((l) => l.includes(`sleep_state="${state}"`))!
        .split(' ')
        .at(-1),
    );
  return { awake: value('awake'), weightsOffloaded: value('weights_offloaded'), discardAll: value('discard_all') };
};
/** GPU 0's used memory as the fake nvidia-smi prints it. */
const smiUsedMiB = () =>
  new Promise<number>((resolve, reject) =>
    execFile(
      SMI,
      ['--query-gpu=memory.used', '--format=csv,noheader,nounits', '-i', '0'],
      { env: { ...process.env, HARU_SIM_GPU_STATE: stateDir } },
      (err, stdout) => (err ? reject(err) : resolve(Number(stdout.trim()))),
    ),
  );
const chat = () =>
  fetch(`${base}/v1/chat/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ model: 'm', messages: [{ role: 'user', content: 'hi' }], max_tokens: 3 }),
  });

// First in the file: the process's first sleep.
it('makes the first sleep of the process the slow one', async () => {
  let started = Date.now();
  expect((await post('/sleep?level=1')).status).toBe(200);
  const first = Date.now() - started;
  await post('/wake_up');
  started = Date.now();
  expect((await post('/sleep?level=1')).status).toBe(200);
  const second = Date.now() - started;
  expect(first).toBeGreaterThanOrEqual(FIRST_SLEEP_DELAY_MS);
  expect(second).toBeLessThan(FIRST_SLEEP_DELAY_MS);
});

it('keeps the configured residue on the GPU while asleep, as nvidia-smi shows it', async () => {
  expect(await smiUsedMiB()).toBe(22_345);
  await post('/sleep?level=1');
  expect(await smiUsedMiB()).toBe(2_345);
  await post('/wake_up');
  expect(await smiUsedMiB()).toBe(22_345);
  await post('/sleep?level=2');
  expect(await smiUsedMiB()).toBe(2_345);
});

it('reads awake on the sleep-state gauge after a partial wake, while /is_sleeping still says asleep', async () => {
  await post('/sleep?level=1');
  expect(await gauge()).toEqual({ awake: 0, weightsOffloaded: 1, discardAll: 0 });
  expect((await post('/wake_up?tags=weights')).status).toBe(200);
  expect(await gauge()).toEqual({ awake: 1, weightsOffloaded: 0, discardAll: 0 });
  expect(await isSleeping()).toBe(true);
  expect(fake.state().sleepingTags).toEqual(['kv_cache']);
  await post('/wake_up?tags=kv_cache');
  expect(await isSleeping()).toBe(false);
});

it('takes level 0: scheduling pauses, memory stays, and tags=scheduling resumes it', async () => {
  expect((await post('/sleep?level=0')).status).toBe(200);
  expect(await isSleeping()).toBe(true);
  expect(await smiUsedMiB()).toBe(22_345);
  expect(await gauge()).toEqual({ awake: 0, weightsOffloaded: 0, discardAll: 0 });
  const queued = chat();
  await eventually('the request waiting', () => fake.state().waiting === 1);
  expect((await post('/wake_up?tags=scheduling')).status).toBe(200);
  expect(await isSleeping()).toBe(false);
  expect((await queued).status).toBe(200);
});

it('tags=scheduling after a level-1 sleep resumes scheduling only: the memory stays asleep', async () => {
  await post('/sleep?level=1');
  expect((await post('/wake_up?tags=scheduling')).status).toBe(200);
  expect(await isSleeping()).toBe(true);
  expect(fake.state()).toMatchObject({ schedulerPaused: false, sleepingTags: ['weights', 'kv_cache'] });
  expect(await smiUsedMiB()).toBe(2_345);
});

it('refuses a level or mode the engine core does not take, and mode=wait on an in-process engine', async () => {
  expect((await post('/sleep?level=3')).status).toBe(500);
  expect((await post('/sleep?level=1&mode=later')).status).toBe(500);
  await fake.setFaults({ inprocEngine: true });
  expect((await post('/sleep?level=1&mode=wait')).status).toBe(500);
  expect(await isSleeping()).toBe(false);
  expect((await post('/sleep?level=1&mode=abort')).status).toBe(200);
});

it('reports its vLLM version, or the one a test sets', async () => {
  expect(await (await fetch(`${base}/version`)).json()).toEqual({ version: SIM_VLLM_VERSION });
  await fake.setFaults({ vllmVersion: '0.11.0' });
  expect(await (await fetch(`${base}/version`)).json()).toEqual({ version: '0.11.0' });
});
