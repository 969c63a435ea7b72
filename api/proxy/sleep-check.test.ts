import { createSleepCheck, serverRoot } from './sleep-check';

describe('sleep check', () => {
  it('asks the vLLM server root, whether the servingUrl ends in /v1 or not', () => {
    expect(serverRoot('http://h:8000/v1')).toBe('http://h:8000');
    expect(serverRoot('http://h:8000/v1/')).toBe('http://h:8000');
    expect(serverRoot('http://h/models/llama/v1?x=1')).toBe('http://h/models/llama');
    expect(serverRoot('http://h:8000')).toBe('http://h:8000');
  });

  it('says asleep only on {"is_sleeping": true}, keeps the answer ttlMs, and treats no answer as awake', async () => {
    let clock = 0;
    const answers: Record<string, () => Response> = {
      'http://a/is_sleeping': () => Response.json({ is_sleeping: true }),
      'http://b/is_sleeping': () => Response.json({ is_sleeping: false }),
      'http://c/is_sleeping': () => new Response('not found', { status: 404 }),
    };
    const asked: string[] = [];
    const check = createSleepCheck({
      ttlMs: 100,
      timeoutMs: 50,
      now: () => clock,
      fetch: async (url) => {
        asked.push(String(url));
        const answer = answers[String(url)];
        if (!answer) throw new TypeError('fetch failed');
        return answer();
      },
    });
    expect(await check.isAsleep('http://a/v1')).toBe(true);
    expect(await check.isAsleep('http://b/v1')).toBe(false);
    expect(await check.isAsleep('http://c/v1')).toBe(false);
    expect(await check.isAsleep('http://dead/v1')).toBe(false);
    expect(await check.isAsleep('http://a')).toBe(true);
    expect(asked).toHaveLength(4);
    clock += 100;
    await check.isAsleep('http://a/v1');
    expect(asked).toHaveLength(5);
  });
});
