/**
 * Fingerprints against the fake vLLM: the supervisor's greedy answer with logprobs, and the echo scoring of a
 * stored answer, over HTTP in vLLM's `/v1/completions` shapes.
 */
import { FINGERPRINT_PROMPT } from '../../schemas/fingerprint';
import { createFakeVllm, type FakeVllm } from '../../sim/vllm/server';
import { scoreAnswers, takeFingerprints } from '../../supervisor/fingerprint';
import { createVllmClient } from '../../supervisor/vllm';

const MODEL = 'org/model-7b';
let fake: FakeVllm;
let port: number;
const vllm = createVllmClient({ timeoutMs: 5_000, wakeTimeoutMs: 5_000 });
const served = () => ({ name: MODEL, port });
const take = async () =>
  (
    await takeFingerprints({ models: [served()], prompt: FINGERPRINT_PROMPT, maxTokens: 6, timeoutMs: 5_000 }, { vllm })
  )[0]!;
const score = async (text: string, tokenCount: number) =>
  (
    await scoreAnswers(
      { answers: [{ ...served(), text, tokenCount }], prompt: FINGERPRINT_PROMPT, timeoutMs: 5_000 },
      { vllm },
    )
  )[0]!;
const sleepAndWake = async () => {
  await vllm.sleep(port, 1);
  await vllm.wakeUp(port);
};

beforeAll(async () => {
  fake = createFakeVllm({ model: MODEL, port: 0, gpuIndex: 0, tokensPerSecond: 10_000, onCrash: () => {} });
  port = await fake.listen();
});
afterEach(() => fake.setFaults(null));
afterAll(() => fake.close());

it('takes a greedy answer with one logprob per token', async () => {
  const print = await take();
  expect(print).toMatchObject({ ok: true, error: null });
  expect(print.tokens).toHaveLength(6);
  expect(print.tokenLogprobs).toHaveLength(6);
  expect(print.tokens.join('')).toBe(print.text);
  expect(print.tokenLogprobs.every((x) => x < 0)).toBe(true);
});

it('a healthy wake scores the stored answer exactly as it was scored when generated', async () => {
  const print = await take();
  await sleepAndWake();
  const again = await score(print.text!, print.tokens.length);
  expect(again).toMatchObject({ ok: true, error: null });
  expect(again.tokenLogprobs).toEqual(print.tokenLogprobs);
});

it('after a garbage wake the stored answer scores far lower and the greedy answer differs', async () => {
  const print = await take();
  await fake.setFaults({ garbageAfterWake: true });
  await sleepAndWake();
  const again = await score(print.text!, print.tokens.length);
  const mean = (xs: number[]) => xs.reduce((a, b) => a + b, 0) / xs.length;
  expect(mean(again.tokenLogprobs)).toBeLessThan(mean(print.tokenLogprobs) - 3);
  const woken = await take();
  expect(woken.ok).toBe(true);
  expect(woken.text).not.toBe(print.text);
  expect(woken.text!.trim()).not.toBe('');
});

it('reports a model that cannot answer instead of throwing', async () => {
  // A sleeping vLLM queues the request until a wake (vllm/v1/engine/core.py): the fingerprint times out.
  await vllm.sleep(port, 1);
  try {
    const print = await take();
    expect(print.ok).toBe(false);
    expect(print.error).toMatch(/timed out after \d+ ms/);
  } finally {
    await vllm.wakeUp(port);
  }
});

it('echo with max_tokens 0 returns the prompt alone, its first token without a logprob (vLLM)', async () => {
  const res = await fetch(`http://127.0.0.1:${port}/v1/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ model: MODEL, prompt: 'one two three', max_tokens: 0, echo: true, logprobs: 1 }),
  });
  const body = (await res.json()) as { choices: { text: string; logprobs: { token_logprobs: (number | null)[] } }[] };
  expect(body.choices[0]!.text).toBe('one two three');
  expect(body.choices[0]!.logprobs.token_logprobs).toHaveLength(3);
  expect(body.choices[0]!.logprobs.token_logprobs[0]).toBeNull();
  const zero = await fetch(`http://127.0.0.1:${port}/v1/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ model: MODEL, prompt: 'x', max_tokens: 0 }),
  });
  expect(zero.status).toBe(400);
});
