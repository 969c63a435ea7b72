import OpenAI from 'openai';

/** One request of the failover benchmark's load and how it ended. */
export interface Outcome {
  kind: 'stream' | 'json';
  startedAt: number;
  endedAt: number;
  ok: boolean;
  /** The `x-haru-domain` that answered; null when none did. */
  domain: string | null;
  content?: string;
  error?: string;
}

/** A steady OpenAI SDK load through the proxy: `concurrency` clients, alternately streaming and not. */
export interface FailoverLoad {
  outcomes: Outcome[];
  /** Lets each client finish its request in flight, then resolves. */
  stop(): Promise<void>;
}

/**
 * Starts `concurrency` OpenAI SDK clients (even ones streaming) sending one chat completion after the other
 * through the proxy at `apiUrl` to the fleet `slug`, models `bench-0` … `bench-<models-1>` in turn.
 * `maxRetries: 0`: the proxy, not the SDK, must carry requests through the failover.
 */
export function startFailoverLoad(opts: {
  apiUrl: string;
  slug: string;
  concurrency: number;
  models: number;
  maxTokens: number;
}): FailoverLoad {
  const openai = new OpenAI({
    baseURL: `${opts.apiUrl}/v1`,
    apiKey: 'unused',
    maxRetries: 0,
    timeout: 180_000,
    defaultHeaders: { 'x-haru-fleet': opts.slug },
  });
  const outcomes: Outcome[] = [];
  let isStopping = false;
  const one = async (kind: Outcome['kind'], model: string) => {
    const startedAt = Date.now();
    try {
      let content = '';
      let domain: string | null;
      const request = { model, messages: [{ role: 'user' as const, content: 'hello' }], max_tokens: opts.maxTokens };
      if (kind === 'stream') {
        const { data, response } = await openai.chat.completions.create({ ...request, stream: true }).withResponse();
        domain = response.headers.get('x-haru-domain');
        for await (const chunk of data) content += chunk.choices[0]?.delta.content ?? '';
      } else {
        const { data, response } = await openai.chat.completions.create(request).withResponse();
        domain = response.headers.get('x-haru-domain');
        content = data.choices[0]?.message.content ?? '';
      }
      outcomes.push({ kind, startedAt, endedAt: Date.now(), ok: content.length > 0, domain, content });
    } catch (err) {
      outcomes.push({ kind, startedAt, endedAt: Date.now(), ok: false, domain: null, error: String(err) });
    }
  };
  const loops = Array.from({ length: opts.concurrency }, async (_, i) => {
    while (!isStopping) await one(i % 2 ? 'json' : 'stream', `bench-${i % opts.models}`);
  });
  return {
    outcomes,
    async stop() {
      isStopping = true;
      await Promise.all(loops);
    },
  };
}
