/**
 * vLLM started with `--api-key`: the fake answers 401 on `/v1/*` without the key (as vLLM's
 * AuthenticationMiddleware does), the supervisor's probes and fingerprints send the key from its config, and a
 * missing or wrong key is reported as a configuration error.
 */
import { FINGERPRINT_PROMPT } from '../../schemas/fingerprint';
import { createFakeVllm, type FakeVllm } from '../../sim/vllm/server';
import { takeFingerprints } from '../../supervisor/fingerprint';
import { probeModels } from '../../supervisor/probe';
import { createVllmClient } from '../../supervisor/vllm';

const MODEL = 'keyed';
const KEY = 'vllm-key-abcdef';
let fake: FakeVllm;
let port: number;
const client = (key?: string) =>
  createVllmClient({ timeoutMs: 5_000, wakeTimeoutMs: 5_000, apiKeys: key ? new Map([[port, key]]) : undefined });
const probe = (key?: string) =>
  probeModels(
    { models: [{ name: MODEL, port }], prompt: 'ready?', maxTokens: 4, timeoutMs: 5_000 },
    { vllm: client(key), now: () => new Date() },
  );

beforeAll(async () => {
  fake = createFakeVllm({
    model: MODEL,
    port: 0,
    gpuIndex: 0,
    tokensPerSecond: 10_000,
    apiKey: KEY,
    onCrash: () => {},
  });
  port = await fake.listen();
});
afterAll(() => fake.close());

it('answers 401 on /v1/* without the key and leaves the admin and health routes open', async () => {
  const res = await fetch(`http://127.0.0.1:${port}/v1/models`);
  expect(res.status).toBe(401);
  expect(await res.json()).toEqual({ error: 'Unauthorized' });
  expect((await fetch(`http://127.0.0.1:${port}/health`)).status).toBe(200);
  expect(await client().isSleeping(port)).toBe(false);
});

it('probes and fingerprints with the configured key', async () => {
  expect((await probe(KEY))[0]).toMatchObject({ ok: true, error: null });
  const [print] = await takeFingerprints(
    { models: [{ name: MODEL, port }], prompt: FINGERPRINT_PROMPT, maxTokens: 4, timeoutMs: 5_000 },
    { vllm: client(KEY) },
  );
  expect(print).toMatchObject({ ok: true, error: null });
});

it('reports a missing or wrong key as a configuration error naming the fix', async () => {
  for (const key of [undefined, 'wrong-key']) {
    const [result] = await probe(key);
    expect(result!.ok).toBe(false);
    expect(result!.error).toMatch(/^HTTP 401: .*--api-key.*apiKey in the supervisor config is missing or wrong/);
  }
});
