import { HaruError } from '../../schemas/errors';
import { readInferenceBody } from './inference-body';

const read = (text: string) => readInferenceBody(Buffer.from(text, 'utf8'));
const refusal = (text: string) => {
  try {
    read(text);
  } catch (err) {
    return err instanceof HaruError ? `${err.code}: ${err.message}` : `not a HaruError: ${String(err)}`;
  }
  return 'accepted';
};

describe('readInferenceBody', () => {
  it.each([
    ['{"model":"m","messages":[]}', 'm', false],
    ['{ "model" :"m",\n\t"stream" : true }  \n', 'm', true],
    ['{"stream":true,"messages":[{"role":"user","content":"a \\"model\\": \\"x\\" }"}],"model":"real"}', 'real', true],
    ['{"messages":[{"content":"ends in a backslash \\\\"}],"model":"m"}', 'm', false],
    ['{"mod\\u0065l":"m\\u00e9","stream":"true"}', 'mé', false],
    ['{"model":"first","model":"last","stream":true,"stream":false}', 'last', false],
    ['{"model":"m","n":1.5e3,"x":null,"y":[{"z":[1,{"w":"}]"}]}],"stream":true}', 'm', true],
    ['{"model":"日本語/モデル","stream":true}', '日本語/モデル', true],
  ])('reads model and stream from %s as JSON.parse would', (text, model, stream) => {
    expect(read(text)).toEqual({ model, stream });
    const parsed = JSON.parse(text) as { model: string; stream?: unknown };
    expect(read(text)).toEqual({ model: parsed.model, stream: parsed.stream === true });
  });

  it.each([
    ['{"model": "x",', /not valid JSON/],
    ['{"model": "x"} trailing', /not valid JSON/],
    ['{"model": "x" "stream": true}', /not valid JSON/],
    ['{"model": "x", "n": 01}', /not valid JSON/],
    ['{"model": "x", "n": tru}', /not valid JSON/],
    ['{"model": "x", "messages": [}', /not valid JSON/],
    ['{"model": "x", "messages": ["unterminated]}', /not valid JSON/],
    ['{"model": "\\q"}', /not valid JSON/],
    ['{model: "x"}', /not valid JSON/],
    ['[1,2]', /must be a JSON object/],
    ['"model"', /must be a JSON object/],
    ['{"messages": []}', /needs a "model" string/],
    ['{"model": 42}', /needs a "model" string/],
    ['{"model": {"name": "x"}}', /needs a "model" string/],
    ['{"model": ""}', /needs a "model" string/],
    ['{}', /needs a "model" string/],
    ['   ', /not valid JSON/],
  ])('refuses %s with 400 invalid_request', (text, message) => {
    expect(refusal(text)).toMatch(/^invalid_request: /);
    expect(refusal(text)).toMatch(message);
  });

  it('refuses an empty or missing body', () => {
    expect(() => readInferenceBody(Buffer.alloc(0))).toThrow(/must be a JSON object with a "model"/);
    expect(() => readInferenceBody(undefined)).toThrow(HaruError);
  });

  it('reads a 30 MiB body whose model and stream follow the bulk', () => {
    const bulk = 'x'.repeat(30 * 1024 * 1024);
    expect(read(`{"messages":[{"role":"user","content":"${bulk}"}],"model":"m","stream":true}`)).toEqual({
      model: 'm',
      stream: true,
    });
  });
});
