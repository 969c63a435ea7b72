import http from 'node:http';
import type { AddressInfo } from 'node:net';
import type { ApiApp } from '../../../api/app';
import { composeApi } from '../../../api/compose';
import { type ApiConfig, defaultApiConfig } from '../../../api/config';
import { silentLogger } from '../../../lib/logger';
import { createDatabase } from '../../../db/client';
import { defaultTemporalSettings } from '../../../temporal/config';

/** Haru's API on 127.0.0.1:0 with a database pool of its own, as a separate `haru api` process would have. */
export interface ChaosApi {
  url: string;
  api: ApiApp;
  close(): Promise<void>;
}

export async function startChaosApi(opts: {
  databaseUrl: string;
  temporalAddress: string;
  taskQueue: string;
  config?: Partial<ApiConfig>;
}): Promise<ChaosApi> {
  const config = defaultApiConfig({ HARU_TASK_QUEUE: opts.taskQueue, reconcileWaitMs: 0, ...opts.config });
  const database = await createDatabase({ databaseUrl: opts.databaseUrl, max: 5 });
  // Composed as api/main.ts composes it (provisioning included), minus the process concerns.
  const composed = await composeApi({
    database,
    config: { ...config, temporal: defaultTemporalSettings(opts.temporalAddress) },
    logger: silentLogger,
    connectTimeoutMs: 2_000,
    queryTimeoutMs: 1_000,
  });
  const { api } = composed;
  const server = http.createServer(api.handle);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    api,
    async close() {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
      await composed.close();
      await database.close();
    },
  };
}

/** One small chat completion through the proxy: status, the domain that served it and the routing header. */
export async function proxiedCompletion(
  apiUrl: string,
  fleet: string,
  model: string,
): Promise<{ status: number; domain: string | null; routing: string | null; content: string; body: string }> {
  const res = await fetch(`${apiUrl}/v1/chat/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'x-haru-fleet': fleet },
    body: JSON.stringify({ model, messages: [{ role: 'user', content: 'hi' }], max_tokens: 4 }),
  });
  const text = await res.text();
  let content = '';
  try {
    content =
      (JSON.parse(text) as { choices?: { message?: { content?: string } }[] }).choices?.[0]?.message?.content ?? '';
  } catch {
    // not JSON: an error page
  }
  return {
    status: res.status,
    domain: res.headers.get('x-haru-domain'),
    routing: res.headers.get('x-haru-routing'),
    content,
    body: text,
  };
}

/** One answer a client got through the proxy: when it came (ms), its status (null: none) and who served it. */
export interface ClientAnswer {
  at: number;
  status: number | null;
  domain: string | null;
}

/**
 * A client sending one small chat completion through the proxy every `everyMs` until stopped, each request on
 * its own (a slow answer does not hold back the next request). `answers` are in the order they came; a
 * request that ended without an answer (a reset) has status null. `stop` aborts what is in flight, unrecorded.
 */
export function steadyClient(
  apiUrl: string,
  fleet: string,
  model: string,
  everyMs = 1_000,
): { answers: ClientAnswer[]; stop(): Promise<void> } {
  const answers: ClientAnswer[] = [];
  const inFlight = new Set<Promise<void>>();
  const abort = new AbortController();
  const send = () => {
    const request = fetch(`${apiUrl}/v1/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-haru-fleet': fleet },
      body: JSON.stringify({ model, messages: [{ role: 'user', content: 'hi' }], max_tokens: 4 }),
      signal: abort.signal,
    })
      .then(async (res) => {
        await res.text();
        answers.push({ at: Date.now(), status: res.status, domain: res.headers.get('x-haru-domain') });
      })
      .catch(() => {
        if (!abort.signal.aborted) answers.push({ at: Date.now(), status: null, domain: null });
      })
      .finally(() => inFlight.delete(request));
    inFlight.add(request);
  };
  const timer = setInterval(send, everyMs);
  send();
  return {
    answers,
    async stop() {
      clearInterval(timer);
      abort.abort();
      await Promise.all(inFlight);
    },
  };
}
