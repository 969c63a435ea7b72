import { describeVllmStatus, judgeProbeAnswer, probeRequestBody } from './probe-answer';

const completion = (message: Record<string, string | null>) => ({ choices: [{ message }] });

describe('judgeProbeAnswer', () => {
  it('passes a chat completion with text in its content, or in a reasoning model’s reasoning', () => {
    expect(judgeProbeAnswer(200, completion({ content: 'hello' }))).toBeNull();
    expect(judgeProbeAnswer(200, completion({ content: null, reasoning_content: 'thinking' }))).toBeNull();
    expect(judgeProbeAnswer(200, completion({ content: '', reasoning: 'thinking' }))).toBeNull();
  });

  it('fails blank text, a body that is not a chat completion, and a non-2xx with vLLM’s message', () => {
    expect(judgeProbeAnswer(200, completion({ content: '  ' }))).toBe('empty content');
    expect(judgeProbeAnswer(200, { choices: [] })).toBe('answer is not a chat completion');
    expect(judgeProbeAnswer(200, null)).toBe('answer is not a chat completion');
    expect(judgeProbeAnswer(404, { error: { message: 'The model `x` does not exist.' } })).toBe(
      'HTTP 404: The model `x` does not exist.',
    );
  });
});

describe('describeVllmStatus', () => {
  it('explains a 401 as the model’s apiKey, and keeps only the status for a body without vLLM’s envelope', () => {
    expect(describeVllmStatus(401, null)).toMatch(/--api-key/);
    expect(describeVllmStatus(502, '<html>')).toBe('HTTP 502');
  });
});

describe('probeRequestBody', () => {
  it('asks one greedy, non-streaming completion', () => {
    expect(probeRequestBody('m', 'hi', 4)).toEqual({
      model: 'm',
      messages: [{ role: 'user', content: 'hi' }],
      max_tokens: 4,
      temperature: 0,
      stream: false,
    });
  });
});
