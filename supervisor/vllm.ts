import { Agent, type Dispatcher, request } from 'undici';
import { z } from 'zod';
import { startDeadline } from '../lib/deadline';
import { causeCode, describeCause } from '../lib/error-cause';
import { type PromSample, parsePrometheusText } from './prometheus-text';

/**
 * How a vLLM call failed: nothing listens on the port (`refused`), no answer within the timeout (`timeout`),
 * another network failure (`unreachable`), or an answer that is not a 2xx of vLLM's shape (`answer`).
 */
export type VllmErrorKind = 'refused' | 'timeout' | 'unreachable' | 'answer';

/** A vLLM call failed: unreachable, timed out, non-2xx, or an answer that does not match vLLM's shape. */
export class VllmError extends Error {
  constructor(
    message: string,
    readonly status: number | null = null,
    readonly kind: VllmErrorKind = 'answer',
  ) {
    super(message);
    this.name = 'VllmError';
  }
}

/**
 * Timeout of the short vLLM calls (version, is_sleeping, health, metrics, reset_prefix_cache): a loopback call a
 * healthy server answers in milliseconds, and one a busy engine delays still comes back well within it.
 */
export const VLLM_CALL_TIMEOUT_MS = 5_000;

export interface VllmClientOptions {
  /** The connection pool (default: a keep-alive Agent of this client's own). */
  dispatcher?: Dispatcher;
  /** Timeout of short calls: is_sleeping, metrics, reset_prefix_cache (default VLLM_CALL_TIMEOUT_MS). */
  timeoutMs?: number;
  /** Timeout of each sleep, wake_up and collective_rpc call. */
  wakeTimeoutMs: number;
  /** The `--api-key` of the server on each port that has one: a bearer token on every call to that port. */
  apiKeys?: ReadonlyMap<number, string>;
}

export interface ChatCompletionResult {
  status: number;
  /** Parsed JSON body, or null when the body was not JSON. */
  body: unknown;
}

const isSleepingSchema = z.object({ is_sleeping: z.boolean() });
const versionSchema = z.object({ version: z.string() });
const MAX_ERROR_BODY = 300;

/**
 * Client for the vLLM servers on this host. Every call goes to `http://127.0.0.1:<port>` (vLLM's dev
 * endpoints must never be exposed beyond loopback) and carries a timeout. A 2xx from sleep/wake is only
 * an acknowledgement: callers re-read `isSleeping` for proof.
 */
export function createVllmClient(opts: VllmClientOptions) {
  // One keep-alive pool for every server of this host. undici's `request`, not `fetch`, with a deadline it
  // clears (lib/deadline.ts): a status read asks every model for /is_sleeping, /metrics and /health, and
  // fetch's WHATWG Request/Response/stream objects plus an `AbortSignal.timeout` per call cost the
  // supervisor several times the CPU of the calls themselves. Each call ends at its own deadline whatever phase
  // it is in (`bound`); the connect timeout bounds how long a connect it abandoned keeps a socket.
  const dispatcher = opts.dispatcher ?? new Agent({ keepAliveTimeout: 10_000, connect: { timeout: 5_000 } });
  const shortTimeoutMs = opts.timeoutMs ?? VLLM_CALL_TIMEOUT_MS;

  async function call(
    port: number,
    method: 'GET' | 'POST',
    pathAndQuery: string,
    timeoutMs: number,
    body?: unknown,
  ): Promise<{ status: number; text: string }> {
    const url = `http://127.0.0.1:${port}${pathAndQuery}`;
    const deadline = startDeadline(timeoutMs);
    // The key goes on every call to a keyed server, not only /v1/*: vLLM's AuthenticationMiddleware
    // (vllm/entrypoints/serve/middleware/authenticate.py) guards /v1, /v2, /inference and /cohere today, and a
    // newer form builds the guarded set from the route table, which takes in /sleep, /wake_up and /is_sleeping;
    // an unguarded route ignores the header, so sending it always is right for both.
    const key = opts.apiKeys?.get(port);
    const headers: Record<string, string> = {};
    if (body !== undefined) headers['content-type'] = 'application/json';
    if (key) headers.authorization = `Bearer ${key}`;
    try {
      const res = await deadline.bound(
        request(url, {
          method,
          headers,
          body: body === undefined ? undefined : JSON.stringify(body),
          signal: deadline.signal,
          dispatcher,
        }),
        (late) => void late.body.dump().catch(() => undefined),
      );
      return { status: res.statusCode, text: await res.body.text() };
    } catch (err) {
      if (deadline.isTimedOut())
        throw new VllmError(
          `${method} ${pathAndQuery} on port ${port} timed out after ${timeoutMs} ms`,
          null,
          'timeout',
        );
      const kind = causeCode(err) === 'ECONNREFUSED' ? 'refused' : 'unreachable';
      throw new VllmError(`${method} ${pathAndQuery} on port ${port} failed: ${describeCause(err)}`, null, kind);
    } finally {
      deadline.clear();
    }
  }

  async function expectOk(port: number, method: 'GET' | 'POST', path: string, timeoutMs: number, body?: unknown) {
    const res = await call(port, method, path, timeoutMs, body);
    if (res.status < 200 || res.status >= 300) {
      throw new VllmError(
        `${method} ${path} on port ${port} answered ${res.status}: ${res.text.slice(0, MAX_ERROR_BODY)}`,
        res.status,
      );
    }
    return res.text;
  }

  /** A POST whose JSON answer the caller judges; a non-JSON body is null. */
  async function jsonCall(port: number, path: string, timeoutMs: number, body: unknown): Promise<ChatCompletionResult> {
    const res = await call(port, 'POST', path, timeoutMs, body);
    let parsed: unknown = null;
    try {
      parsed = JSON.parse(res.text);
    } catch {
      // left null: the caller reports a non-JSON answer
    }
    return { status: res.status, body: parsed };
  }

  return {
    /**
     * `POST /sleep?level=N`, with `&mode=wait` when asked (only vLLM >= 0.17 reads it: older ones ignore it and
     * abort). With `wait` vLLM answers once the running requests finished. Resolves on a 2xx; throws VllmError.
     */
    async sleep(port: number, level: 1 | 2, mode?: 'wait'): Promise<void> {
      await expectOk(port, 'POST', `/sleep?level=${level}${mode ? `&mode=${mode}` : ''}`, opts.wakeTimeoutMs);
    },
    /** `GET /version`: the server's vLLM version (`{"version": "0.17.1"}`); throws VllmError otherwise. */
    async version(port: number): Promise<string> {
      const text = await expectOk(port, 'GET', '/version', shortTimeoutMs);
      let body: unknown = null;
      try {
        body = JSON.parse(text);
      } catch {
        // judged below
      }
      const parsed = versionSchema.safeParse(body);
      if (!parsed.success)
        throw new VllmError(`GET /version on port ${port} answered ${text.slice(0, MAX_ERROR_BODY)}`);
      return parsed.data.version;
    },
    /** `POST /wake_up`, optionally only some memory tags (`weights`, `kv_cache`). */
    async wakeUp(port: number, tags: string[] = []): Promise<void> {
      const query = tags.map((t) => `tags=${encodeURIComponent(t)}`).join('&');
      await expectOk(port, 'POST', `/wake_up${query ? `?${query}` : ''}`, opts.wakeTimeoutMs);
    },
    /** `POST /collective_rpc {method}` on every worker (e.g. `reload_weights` after a level-2 sleep). */
    async collectiveRpc(port: number, method: string): Promise<void> {
      await expectOk(port, 'POST', '/collective_rpc', opts.wakeTimeoutMs, { method });
    },
    /**
     * `POST /reset_prefix_cache`: cached prefixes may be stale after any wake. Resolves false when vLLM answered
     * `{"success": false}` (the engine's `reset_prefix_cache` returns false while requests run,
     * vllm/engine/protocol.py); an empty 200, as vllm/entrypoints/serve/cache/api_router.py sends, is success.
     */
    async resetPrefixCache(port: number): Promise<boolean> {
      const text = await expectOk(port, 'POST', '/reset_prefix_cache', shortTimeoutMs);
      try {
        return (JSON.parse(text) as { success?: unknown })?.success !== false;
      } catch {
        return true;
      }
    },
    /** `GET /is_sleeping`, parsed. Throws VllmError when unreachable or the body is not `{is_sleeping: bool}`. */
    async isSleeping(port: number): Promise<boolean> {
      const text = await expectOk(port, 'GET', '/is_sleeping', shortTimeoutMs);
      let parsed: z.ZodSafeParseResult<{ is_sleeping: boolean }>;
      try {
        parsed = isSleepingSchema.safeParse(JSON.parse(text));
      } catch {
        throw new VllmError(`GET /is_sleeping on port ${port} answered non-JSON: ${text.slice(0, MAX_ERROR_BODY)}`);
      }
      if (!parsed.success) {
        throw new VllmError(`GET /is_sleeping on port ${port} answered ${text.slice(0, MAX_ERROR_BODY)}`);
      }
      return parsed.data.is_sleeping;
    },
    /** `GET /health`: resolves on 200 (vLLM answers it from the API server after asking the engine core). */
    async health(port: number): Promise<void> {
      await expectOk(port, 'GET', '/health', shortTimeoutMs);
    },
    /** `GET /metrics`, parsed into samples. */
    async metrics(port: number): Promise<PromSample[]> {
      return parsePrometheusText(await expectOk(port, 'GET', '/metrics', shortTimeoutMs));
    },
    /**
     * `POST /v1/chat/completions` with `body`, bounded by `timeoutMs` (a timeout throws VllmError). Any HTTP
     * status resolves: the caller judges it.
     */
    async chatCompletion(port: number, body: unknown, timeoutMs: number): Promise<ChatCompletionResult> {
      return jsonCall(port, '/v1/chat/completions', timeoutMs, body);
    },
    /** `POST /v1/completions` with `body` (the fingerprint's plain-text prompt); resolves on any status. */
    async completion(port: number, body: unknown, timeoutMs: number): Promise<ChatCompletionResult> {
      return jsonCall(port, '/v1/completions', timeoutMs, body);
    },
  };
}
export type VllmClient = ReturnType<typeof createVllmClient>;
