/**
 * The fake vLLM's continuation of an assistant turn (`continue_final_message` / `add_generation_prompt`,
 * vllm/entrypoints/openai/protocol.py and serving_chat.py) and its mid-stream death (`crashAfterTokens`).
 */
import OpenAI from 'openai';
import { tokensAlreadyWritten } from './continuation';
import { createFakeVllm, type FakeVllm } from './server';

const model = 'org/model-7b';
let fake: FakeVllm;
let base: string;
let client: OpenAI;
let crashes = 0;

beforeAll(async () => {
  fake = createFakeVllm({ model, port: 0, gpuIndex: 0, tokensPerSecond: 5_000, onCrash: () => (crashes += 1) });
  base = `http://127.0.0.1:${await fake.listen()}`;
  client = new OpenAI({ baseURL: `${base}/v1`, apiKey: 'unused', maxRetries: 0 });
});
afterEach(() => fake.setFaults(null));
afterAll(() => fake.close());

const chat = (body: object) =>
  fetch(`${base}/v1/chat/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ model, ...body }),
  });

describe('tokensAlreadyWritten', () => {
  it('finds the longest prefix of the reply that the text ends with', () => {
    const reply = ['This', ' is', ' a', ' reply'];
    expect(tokensAlreadyWritten(reply, 'user: hi\nThis is a')).toBe(3);
    expect(tokensAlreadyWritten(reply, 'This is a reply')).toBe(4);
    expect(tokensAlreadyWritten(reply, 'something else')).toBe(0);
    expect(tokensAlreadyWritten(reply, '')).toBe(0);
  });
});

describe('continue_final_message', () => {
  it('answers 400 when continue_final_message and add_generation_prompt are both true, as vLLM does', async () => {
    const res = await chat({
      messages: [{ role: 'assistant', content: 'This' }],
      continue_final_message: true,
      add_generation_prompt: true,
    });
    expect(res.status).toBe(400);
    expect(await res.json()).toMatchObject({
      error: { message: 'Cannot set both `continue_final_message` and `add_generation_prompt` to True.', code: 400 },
    });
  });

  it('accepts continue_final_message without add_generation_prompt (the validator reads the raw field)', async () => {
    const res = await chat({ messages: [{ role: 'assistant', content: 'This is' }], continue_final_message: true });
    expect(res.status).toBe(200);
  });

  it('carries on from the final assistant message, so the parts add up to the uninterrupted reply', async () => {
    const whole = await client.chat.completions.create({ model, messages: [{ role: 'user', content: 'hi' }] });
    const text = whole.choices[0]!.message.content!;
    const cont = await chat({
      messages: [
        { role: 'user', content: 'hi' },
        { role: 'assistant', content: 'This is a' },
      ],
      continue_final_message: true,
      add_generation_prompt: false,
    });
    const body = (await cont.json()) as { choices: { message: { content: string } }[] };
    expect(`This is a${body.choices[0]!.message.content}`).toBe(text);
  });

  it("streams in the last message's role when add_generation_prompt is false (get_chat_request_role)", async () => {
    const stream = await client.chat.completions.create({
      model,
      messages: [{ role: 'user', content: 'go on: This' }],
      add_generation_prompt: false,
      stream: true,
    } as OpenAI.ChatCompletionCreateParamsStreaming);
    const first = await stream[Symbol.asyncIterator]().next();
    expect(first.value?.choices[0]?.delta.role).toBe('user');
  });

  it('continues a completions prompt that ends with part of the reply', async () => {
    const answer = await client.completions.create({ model, prompt: 'Q: hi\nA: This is', max_tokens: 2 });
    expect(answer.choices[0]?.text).toBe(' a simulated');
  });
});

describe('crashAfterTokens', () => {
  /** A fake vLLM whose crash closes it, as a dead host's connections end; resolves the crash count too. */
  async function dying(crashAfterTokens: number) {
    let crashed = 0;
    const vllm: FakeVllm = createFakeVllm({
      model,
      port: 0,
      gpuIndex: 0,
      tokensPerSecond: 5_000,
      onCrash: () => {
        crashed += 1;
        void vllm.close();
      },
    });
    const url = `http://127.0.0.1:${await vllm.listen()}/v1/chat/completions`;
    await vllm.setFaults({ crashAfterTokens });
    const post = (body: object) =>
      fetch(url, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });
    return { post, crashes: () => crashed };
  }

  it('dies right after relaying that many tokens of a stream, before [DONE]', async () => {
    const vllm = await dying(2);
    const res = await vllm.post({ model, messages: [], stream: true });
    const reader = res.body!.getReader();
    let text = '';
    const err = await (async () => {
      for (let r = await reader.read(); !r.done; r = await reader.read()) text += Buffer.from(r.value).toString();
    })().catch((e: unknown) => e);
    expect(String(err)).toMatch(/terminated/); // undici: the connection ended mid-body
    expect(vllm.crashes()).toBe(1);
    expect(text.match(/"content":"[^"]+"/g)).toEqual(['"content":"This"', '"content":" is"']);
    expect(text).not.toContain('[DONE]');
  });

  it('dies before answering a non-streaming request that reaches that many tokens', async () => {
    const vllm = await dying(3);
    await expect(vllm.post({ model, messages: [] })).rejects.toThrow();
    expect(vllm.crashes()).toBe(1);
  });
});
