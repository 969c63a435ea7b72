import { FailureType } from '../schemas/failures';
import { judgeServingUrlAnswer, servingUrlProbeRequest } from './serving-url-probe';

const answer = (status: number, body: unknown) => ({ status, text: JSON.stringify(body) });
const completion = (content: string) => ({ choices: [{ message: { content } }] });

describe('servingUrlProbeRequest', () => {
  it('posts the probe to the chat endpoint the proxy would use for the servingUrl', () => {
    const request = servingUrlProbeRequest(
      { name: 'qwen', servingUrl: 'https://gw/models/qwen' },
      { prompt: 'hi', maxTokens: 4 },
    );
    expect(request.url).toBe('https://gw/models/qwen/v1/chat/completions');
    expect(JSON.parse(request.body)).toMatchObject({ model: 'qwen', max_tokens: 4, stream: false });
  });
});

describe('judgeServingUrlAnswer', () => {
  it('passes a chat completion with text', () => {
    expect(judgeServingUrlAnswer(answer(200, completion('hello')), false)).toBeNull();
  });

  it('fails a 401 as Unauthorized, saying whether the layout named a token', () => {
    const none = judgeServingUrlAnswer(answer(401, {}), false);
    expect(none).toMatchObject({ type: FailureType.Unauthorized });
    expect(none!.why).not.toContain('was refused');
    expect(judgeServingUrlAnswer(answer(401, {}), true)!.why).toContain('(the token it names was refused)');
  });

  it('fails blank text and an error status as ProbeFailed', () => {
    expect(judgeServingUrlAnswer(answer(200, completion(' ')), false)).toEqual({
      type: FailureType.ProbeFailed,
      why: 'empty content',
    });
    expect(judgeServingUrlAnswer(answer(503, { error: { message: 'loading' } }), false)).toEqual({
      type: FailureType.ProbeFailed,
      why: 'HTTP 503: loading',
    });
  });

  it('quotes the start of a body that is not JSON', () => {
    const failure = judgeServingUrlAnswer({ status: 200, text: `<html>${'x'.repeat(400)}` }, false);
    expect(failure!.why).toBe(`answer is not a chat completion: <html>${'x'.repeat(294)}`);
  });
});
