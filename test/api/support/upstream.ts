import http from 'node:http';
import type { AddressInfo } from 'node:net';

/** One request as the fake upstream saw it. */
export interface SeenRequest {
  method: string;
  path: string;
  headers: http.IncomingHttpHeaders;
  body: Buffer;
  /** Set when the connection closed before the upstream finished its answer (the proxy aborted). */
  aborted: boolean;
  finished: boolean;
}

export type UpstreamHandler = (
  req: http.IncomingMessage,
  body: Buffer,
  res: http.ServerResponse,
) => void | Promise<void>;

export interface FakeUpstream {
  url: string;
  port: number;
  seen: SeenRequest[];
  /** Replace the behaviour for the next requests. */
  handle(handler: UpstreamHandler): void;
  /** Resolves when `predicate` holds for some seen request (checked on every change). */
  waitFor(predicate: (seen: SeenRequest[]) => boolean, timeoutMs?: number): Promise<void>;
  close(): Promise<void>;
}

/** An OpenAI-style answer for a chat completion (non-streaming). */
export const chatCompletion = (model: string, content: string) => ({
  id: 'chatcmpl-test',
  object: 'chat.completion',
  created: 1,
  model,
  choices: [{ index: 0, message: { role: 'assistant', content }, finish_reason: 'stop' }],
  usage: { prompt_tokens: 1, completion_tokens: 1, total_tokens: 2 },
});

/** One SSE frame of a streamed chat completion. */
export const chatChunk = (model: string, content: string) =>
  `data: ${JSON.stringify({
    id: 'chatcmpl-test',
    object: 'chat.completion.chunk',
    created: 1,
    model,
    choices: [{ index: 0, delta: { content }, finish_reason: null }],
  })}\n\n`;

/**
 * Default behaviour: answers like vLLM, naming itself in the content so tests see who served, and reports
 * itself awake on `GET /is_sleeping` (vLLM's sleep-mode endpoint, vllm/entrypoints/openai/api_server.py).
 */
export const answerAs =
  (name: string, opts: { asleep?: () => boolean } = {}): UpstreamHandler =>
  (req, body, res) => {
    if (req.method === 'GET' && req.url === '/is_sleeping') {
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ is_sleeping: opts.asleep?.() ?? false }));
      return;
    }
    const json = JSON.parse(body.toString('utf8')) as { model: string; stream?: boolean };
    if (json.stream) {
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      res.write(chatChunk(json.model, `${name}:`));
      res.write(chatChunk(json.model, 'ok'));
      res.end('data: [DONE]\n\n');
      return;
    }
    res.writeHead(200, { 'content-type': 'application/json' });
    res.end(JSON.stringify(chatCompletion(json.model, `${name}:ok`)));
  };

/**
 * A small HTTP server standing in for a vLLM model server in proxy-mechanics tests: records every request
 * byte for byte and answers with the current handler. Listens on 127.0.0.1 (port 0 unless given).
 */
export async function startFakeUpstream(name: string, port = 0): Promise<FakeUpstream> {
  let handler: UpstreamHandler = answerAs(name);
  const seen: SeenRequest[] = [];
  const waiters = new Set<() => void>();
  const changed = () => {
    for (const w of waiters) w();
  };
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const record: SeenRequest = {
        method: req.method ?? '',
        path: req.url ?? '',
        headers: req.headers,
        body: Buffer.concat(chunks),
        aborted: false,
        finished: false,
      };
      seen.push(record);
      res.on('close', () => {
        if (!res.writableFinished) record.aborted = true;
        else record.finished = true;
        changed();
      });
      changed();
      Promise.resolve()
        .then(() => handler(req, record.body, res))
        .catch(() => res.destroy());
    });
  });
  await new Promise<void>((resolve) => server.listen(port, '127.0.0.1', resolve));
  const actual = (server.address() as AddressInfo).port;
  return {
    url: `http://127.0.0.1:${actual}`,
    port: actual,
    seen,
    handle(h) {
      handler = h;
    },
    waitFor(predicate, timeoutMs = 20_000) {
      if (predicate(seen)) return Promise.resolve();
      return new Promise((resolve, reject) => {
        const check = () => {
          if (!predicate(seen)) return;
          clearTimeout(timer);
          waiters.delete(check);
          resolve();
        };
        const timer = setTimeout(() => {
          waiters.delete(check);
          reject(new Error(`upstream ${name}: condition not met within ${timeoutMs} ms`));
        }, timeoutMs);
        waiters.add(check);
      });
    },
    close() {
      server.closeAllConnections();
      return new Promise((resolve) => server.close(() => resolve()));
    },
  };
}
