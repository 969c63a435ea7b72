import { continuationBody, requestRefusal } from './continuation';
import { beginContinuation, newTranscript, SseFramer, spliceEvent, type Transcript } from './sse-splice';

const chat = (id: string, delta: Record<string, unknown>, finish: string | null = null, extra = {}) =>
  `data: ${JSON.stringify({ id, object: 'chat.completion.chunk', created: 1, model: 'm', choices: [{ index: 0, delta, logprobs: null, finish_reason: finish }], ...extra })}`;
const usageEvent = (id: string, prompt: number, completion: number) =>
  `data: ${JSON.stringify({ id, object: 'chat.completion.chunk', created: 2, model: 'm', choices: [], usage: { prompt_tokens: prompt, completion_tokens: completion, total_tokens: prompt + completion } })}`;
const relay = (t: Transcript, events: string[]) =>
  events.map((e) => spliceEvent(t, e)).filter((e): e is string => e !== null);
interface ChunkJson {
  id: string;
  created: number;
  choices: { delta: Record<string, unknown>; finish_reason: string | null }[];
  usage?: Record<string, number>;
}
const data = (event: string) => JSON.parse(event.slice(6)) as ChunkJson;

describe('SseFramer', () => {
  it('yields whole events only, keeping a split event and a split UTF-8 sequence until the rest arrives', () => {
    const framer = new SseFramer();
    const bytes = Buffer.from('data: {"a":"é"}\n\ndata: [DONE]\n\n');
    const cut = bytes.indexOf(0xa9); // inside the two bytes of é
    expect(framer.push(bytes.subarray(0, cut))).toEqual([]);
    expect(framer.push(bytes.subarray(cut, cut + 10))).toEqual(['data: {"a":"é"}']);
    expect(framer.push(bytes.subarray(cut + 10))).toEqual(['data: [DONE]']);
  });
});

describe('spliceEvent', () => {
  it('passes the first part through byte for byte and records its id, content and token count', () => {
    const t = newTranscript(1024);
    const events = [
      chat('a', { role: 'assistant', content: '' }),
      chat('a', { content: 'Hel' }),
      chat('a', { content: 'lo' }),
    ];
    expect(relay(t, events)).toEqual(events);
    expect(t).toMatchObject({ id: 'a', text: 'Hello', tokens: 2, finished: false, done: false, refusal: null });
  });

  it('rewrites a continuation onto the first part: same id, no second role chunk, usage of both parts', () => {
    const t = newTranscript(1024);
    relay(t, [
      chat('a', { role: 'assistant', content: '' }),
      chat('a', { content: 'Hel' }),
      chat('a', { content: 'lo' }),
    ]);
    beginContinuation(t);
    // vLLM's continuation: its own id, a role chunk, and a prompt that now holds the 2 relayed tokens.
    const out = relay(t, [
      chat('b', { role: 'assistant', content: '' }),
      chat('b', { content: ' world' }, 'stop'),
      usageEvent('b', 12, 1),
      'data: [DONE]',
    ]);
    expect(out).toHaveLength(3);
    expect(out.slice(0, 2).map((e) => data(e).id)).toEqual(['a', 'a']);
    expect(data(out[0]!).choices[0]).toMatchObject({ delta: { content: ' world' }, finish_reason: 'stop' });
    expect(data(out[0]!).created).toBe(1);
    expect(data(out[1]!).usage).toEqual({ prompt_tokens: 10, completion_tokens: 3, total_tokens: 13 });
    expect(out[2]).toBe('data: [DONE]');
    expect(t).toMatchObject({ text: 'Hello world', tokens: 3, finished: true, done: true });
  });

  it('keeps the role out of a continuation chunk that also carries content', () => {
    const t = newTranscript(1024);
    relay(t, [chat('a', { content: 'x' })]);
    beginContinuation(t);
    const [out] = relay(t, [chat('b', { role: 'assistant', content: 'y' })]);
    expect(data(out!).choices[0]?.delta).toEqual({ content: 'y' });
  });

  it('takes the prompt tokens from continuous usage stats of the first part when they came', () => {
    const t = newTranscript(1024);
    relay(t, [
      chat('a', { content: 'x' }, null, { usage: { prompt_tokens: 7, completion_tokens: 1, total_tokens: 8 } }),
    ]);
    beginContinuation(t);
    const [out] = relay(t, [usageEvent('b', 30, 4)]);
    expect(data(out!).usage).toEqual({ prompt_tokens: 7, completion_tokens: 5, total_tokens: 12 });
  });

  it('records /v1/completions text', () => {
    const t = newTranscript(1024);
    relay(t, [`data: ${JSON.stringify({ id: 'c', choices: [{ index: 0, text: 'abc', finish_reason: null }] })}`]);
    expect(t.text).toBe('abc');
  });

  it.each([
    ['tool_calls', { tool_calls: [{ index: 0, function: { name: 'f' } }] }],
    ['reasoning', { reasoning_content: 'hmm' }],
  ])('refuses a continuation once %s deltas were relayed', (reason, delta) => {
    const t = newTranscript(1024);
    relay(t, [chat('a', { content: 'x' }), chat('a', delta)]);
    expect(t.refusal).toBe(reason);
    expect(t.text).toBe('');
  });

  it('refuses a continuation for a second choice and for logprobs', () => {
    const n = newTranscript(1024);
    relay(n, [`data: ${JSON.stringify({ id: 'a', choices: [{ index: 1, delta: { content: 'x' } }] })}`]);
    expect(n.refusal).toBe('n');
    const lp = newTranscript(1024);
    relay(lp, [
      `data: ${JSON.stringify({ id: 'a', choices: [{ index: 0, delta: { content: 'x' }, logprobs: { content: [] } }] })}`,
    ]);
    expect(lp.refusal).toBe('logprobs');
  });

  it('drops the kept text and refuses a continuation once it outgrows the byte bound', () => {
    const t = newTranscript(4);
    relay(t, [chat('a', { content: 'abc' })]);
    expect(t.refusal).toBeNull();
    relay(t, [chat('a', { content: 'de' })]);
    expect(t).toMatchObject({ refusal: 'memory', text: '', tokens: 2 });
  });

  it('passes comments, error events and non-JSON data through', () => {
    const t = newTranscript(16);
    beginContinuation(t);
    expect(relay(t, [': ping', 'data: {"error":{"message":"x"}}', 'data: nope'])).toEqual([
      ': ping',
      'data: {"error":{"message":"x"}}',
      'data: nope',
    ]);
  });
});

describe('continuationBody', () => {
  const relayed = (text: string, tokens: number) => ({ ...newTranscript(1024), text, tokens });

  it('appends the relayed text as an open assistant turn and lowers max_tokens and max_completion_tokens', () => {
    const body = {
      model: 'm',
      messages: [{ role: 'user', content: 'hi' }],
      max_tokens: 10,
      max_completion_tokens: 8,
      stream: true,
    };
    expect(continuationBody('chat/completions', body, relayed('Hello', 3))).toEqual({
      model: 'm',
      messages: [
        { role: 'user', content: 'hi' },
        { role: 'assistant', content: 'Hello' },
      ],
      max_tokens: 7,
      max_completion_tokens: 5,
      stream: true,
      continue_final_message: true,
      add_generation_prompt: false,
    });
  });

  it('extends a final assistant message the client was already continuing', () => {
    const body = {
      messages: [{ role: 'assistant', content: 'Once' }],
      continue_final_message: true,
      add_generation_prompt: false,
    };
    expect(continuationBody('chat/completions', body, relayed(' upon', 1)).messages).toEqual([
      { role: 'assistant', content: 'Once upon' },
    ]);
  });

  it('appends the generated text to a completions prompt and leaves an unset max_tokens unset', () => {
    expect(continuationBody('completions', { prompt: 'Say: ', stream: true }, relayed('abc', 2))).toEqual({
      prompt: 'Say: abc',
      stream: true,
    });
  });

  it('sends the original body when nothing was relayed yet', () => {
    const body = { messages: [], max_tokens: 3 };
    expect(continuationBody('chat/completions', body, relayed('', 0))).toBe(body);
  });
});

describe('requestRefusal', () => {
  it.each([
    ['chat/completions', { messages: [], n: 2 }, 'n'],
    ['chat/completions', { messages: [], logprobs: true }, 'logprobs'],
    ['chat/completions', { messages: [], top_logprobs: 2 }, 'logprobs'],
    ['completions', { prompt: 'x', logprobs: 1 }, 'logprobs'],
    ['completions', { prompt: 'x', echo: true }, 'echo'],
    ['completions', { prompt: [1, 2] }, 'prompt'],
    ['chat/completions', { prompt: 'x' }, 'body'],
    ['chat/completions', { messages: [], n: 1, logprobs: false }, null],
    ['completions', { prompt: 'x' }, null],
  ] as const)('%s %j -> %s', (endpoint, body, reason) => {
    expect(requestRefusal(endpoint, body)).toBe(reason);
  });
});
