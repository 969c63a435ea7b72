/**
 * vLLM started with `--api-key`: the fake answers 401 on the paths vLLM's AuthenticationMiddleware guards
 * (`/v1`, `/v2`, `/inference`, `/cohere`) without the key, the supervisor's probes and fingerprints send the key from its config, and a
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

it("guards exactly what vLLM's AuthenticationMiddleware guards, with its header rules and its 401 body", async () => {
  // vllm/entrypoints/serve/middleware/authenticate.py: GUARDED_PREFIX, verify_token, the OPTIONS skip.
  const call = async (path: string, init: RequestInit = {}) => {
    const res = await fetch(`http://127.0.0.1:${port}${path}`, init);
    return { status: res.status, type: res.headers.get('content-type'), body: await res.text() };
  };
  const refused = { status: 401, type: 'application/json', body: '{"error":"Unauthorized"}' };
  for (const path of [
    '/v1/models',
    '/v1',
    '/v1beta',
    '/v2/models',
    '/inference/v1/generate',
    '/cohere/v2/rerank',
    '/%76%31/models',
  ])
    expect([path, await call(path)]).toEqual([path, refused]);
  const withKey = (authorization: string) => call('/v1/models', { headers: { authorization } });
  expect((await withKey(`Bearer ${KEY}`)).status).toBe(200);
  expect((await withKey(`bearer ${KEY}`)).status).toBe(200); // the scheme in any case
  expect((await withKey(`BEARER ${KEY}`)).status).toBe(200);
  for (const wrong of [`Bearer  ${KEY}`, `Token ${KEY}`, KEY, `Bearer ${KEY}x`, 'Bearer'])
    expect([wrong, (await withKey(wrong)).status]).toEqual([wrong, 401]);
  // A CORS preflight passes the guard (the fake then has no such route).
  expect((await call('/v1/models', { method: 'OPTIONS' })).status).not.toBe(401);
  for (const open of ['/health', '/metrics', '/version', '/is_sleeping'])
    expect([open, (await call(open)).status]).toEqual([open, 200]);
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
