import { upstreamUrl } from './serving-url';

describe('upstreamUrl', () => {
  it.each([
    ['http://h:8000', 'chat/completions', 'http://h:8000/v1/chat/completions'],
    ['http://h:8000/', 'embeddings', 'http://h:8000/v1/embeddings'],
    ['http://h:8000/v1', 'completions', 'http://h:8000/v1/completions'],
    ['http://h:8000/v1/', 'completions', 'http://h:8000/v1/completions'],
    ['https://h/models/qwen', 'chat/completions', 'https://h/models/qwen/v1/chat/completions'],
    ['http://h:8000/v1?x=1#y', 'completions', 'http://h:8000/v1/completions'],
  ] as const)('%s + %s -> %s', (base, endpoint, expected) => {
    expect(upstreamUrl(base, endpoint)).toBe(expected);
  });

  it('answers the same URL again from its memo', () => {
    const first = upstreamUrl('http://memo:8000', 'embeddings');
    expect(upstreamUrl('http://memo:8000', 'embeddings')).toBe(first);
  });
});
