import {
  type FingerprintRequest,
  type FingerprintResponse,
  fingerprintResponseSchema,
  type ScoreRequest,
  type ScoreResponse,
  scoreResponseSchema,
} from '../schemas/fingerprint';
import { ApplicationFailure } from '@temporalio/common';
import { Agent, type Dispatcher, request } from 'undici';
import type { SupervisorClientTls } from './supervisor-tls';
import type { z } from 'zod';
import { describeCause, findCause } from '../lib/error-cause';
import { errorBodySchema } from '../schemas/errors';
import { FailureType } from '../schemas/failures';
import {
  gpuMemoryReportSchema,
  probeResponseSchema,
  supervisorActionResponseSchema,
  supervisorStatusSchema,
  type GpuMemoryReport,
  type ProbeRequest,
  type ProbeResponse,
  type SleepRequest,
  type SupervisorActionResponse,
  type SupervisorStatus,
  type TrainingStartRequest,
  type TrainingStopRequest,
  type WakeRequest,
} from '../schemas/supervisor';

/** Per-call options: the activity's cancellation signal and a timeout for this one request. */
export interface SupervisorRequestOptions {
  signal?: AbortSignal;
  timeoutMs?: number;
}

/**
 * The supervisor HTTP API (docs/architecture.md §6.2) as typed calls. Every method either returns a parsed response or
 * throws an ApplicationFailure whose type says what to do about it:
 * - `Unauthorized` (non-retryable): 401/403, the token is wrong or missing;
 * - `SupervisorUnreachable` (retryable): connection error, timeout, 5xx or 429 (`nextRetryDelay` from Retry-After);
 * - `InvalidTarget` (non-retryable): any other 4xx, the request names something the host does not have;
 * - `InvalidResponse` (non-retryable): a 2xx whose body does not match its schema.
 * When `signal` aborts, its reason (the activity's CancelledFailure) is thrown instead.
 */
export interface SupervisorClient {
  status(baseUrl: string, opts?: SupervisorRequestOptions): Promise<SupervisorStatus>;
  gpuMemory(baseUrl: string, opts?: SupervisorRequestOptions): Promise<GpuMemoryReport>;
  sleep(baseUrl: string, body: SleepRequest, opts?: SupervisorRequestOptions): Promise<SupervisorActionResponse>;
  wake(baseUrl: string, body: WakeRequest, opts?: SupervisorRequestOptions): Promise<SupervisorActionResponse>;
  startTraining(
    baseUrl: string,
    body: TrainingStartRequest,
    opts?: SupervisorRequestOptions,
  ): Promise<SupervisorActionResponse>;
  stopTraining(
    baseUrl: string,
    body: TrainingStopRequest,
    opts?: SupervisorRequestOptions,
  ): Promise<SupervisorActionResponse>;
  probe(baseUrl: string, body: ProbeRequest, opts?: SupervisorRequestOptions): Promise<ProbeResponse>;
  /** Each model's greedy answer to a prompt with its token logprobs (`POST /v1/fingerprint`). */
  fingerprint(baseUrl: string, body: FingerprintRequest, opts?: SupervisorRequestOptions): Promise<FingerprintResponse>;
  /** How each model scores a stored answer (`POST /v1/fingerprint/score`). */
  scoreFingerprint(baseUrl: string, body: ScoreRequest, opts?: SupervisorRequestOptions): Promise<ScoreResponse>;
}

export interface SupervisorClientOptions {
  /**
   * The undici dispatcher for every call; by default one keep-alive Agent per client, so a monitor's polls
   * reuse their connection to each supervisor.
   */
  dispatcher?: Dispatcher;
  /** Bearer token (HARU_SUPERVISOR_TOKEN); no Authorization header when absent. */
  token?: string;
  /** For https:// supervisors: the CA to verify them against (default: system CAs), the client certificate. */
  tls?: SupervisorClientTls;
  /** Timeout of a request that names none (default 10 s). */
  defaultTimeoutMs?: number;
}

/** Parses a Retry-After header (seconds or HTTP date) into milliseconds; undefined when absent or bad. */
export function retryAfterMs(header: string | null, now: Date = new Date()): number | undefined {
  if (!header) return undefined;
  const seconds = Number(header);
  if (Number.isFinite(seconds) && seconds >= 0) return Math.round(seconds * 1000);
  const at = Date.parse(header);
  return Number.isNaN(at) ? undefined : Math.max(0, at - now.getTime());
}

const joinUrl = (baseUrl: string, path: string): string =>
  new URL(path, baseUrl.endsWith('/') ? baseUrl : `${baseUrl}/`).toString();

/**
 * Creates the client. Calls go through undici's `request` (not `fetch`, whose WHATWG Request, Response and
 * stream objects cost about three times the CPU per call: the fleet monitor makes several calls a second
 * per fleet).
 */
export function createSupervisorClient(options: SupervisorClientOptions = {}): SupervisorClient {
  const defaultTimeoutMs = options.defaultTimeoutMs ?? 10_000;
  const dispatcher = options.dispatcher ?? new Agent({ keepAliveTimeout: 30_000, connect: { ...options.tls } });

  async function call<S extends z.ZodType>(
    method: 'GET' | 'POST',
    baseUrl: string,
    path: string,
    schema: S,
    body: unknown,
    opts: SupervisorRequestOptions = {},
  ): Promise<z.infer<S>> {
    const url = joinUrl(baseUrl, path);
    const what = `${method} ${url}`;
    const timeoutMs = opts.timeoutMs ?? defaultTimeoutMs;
    // One controller for the timeout and the caller's signal (cheaper than AbortSignal.timeout + any).
    const controller = new AbortController();
    let isTimedOut = false;
    const timer = setTimeout(() => {
      isTimedOut = true;
      controller.abort();
    }, timeoutMs);
    const onAbort = () => controller.abort(opts.signal?.reason);
    if (opts.signal?.aborted) onAbort();
    else opts.signal?.addEventListener('abort', onAbort, { once: true });
    const headers: Record<string, string> = { accept: 'application/json' };
    if (body !== undefined) headers['content-type'] = 'application/json';
    if (options.token) headers.authorization = `Bearer ${options.token}`;
    let response: Dispatcher.ResponseData;
    let text: string;
    try {
      response = await request(url, {
        method,
        headers,
        body: body === undefined ? undefined : JSON.stringify(body),
        signal: controller.signal,
        dispatcher,
      });
      text = await response.body.text();
    } catch (err) {
      if (opts.signal?.aborted) throw opts.signal.reason ?? err;
      const reason = isTimedOut ? `timed out after ${timeoutMs} ms` : describeNetworkError(err);
      throw ApplicationFailure.retryable(`supervisor ${what}: ${reason}`, FailureType.SupervisorUnreachable);
    } finally {
      clearTimeout(timer);
      opts.signal?.removeEventListener('abort', onAbort);
    }
    if (response.statusCode < 200 || response.statusCode > 299) throw httpFailure(what, response, text);
    let json: unknown;
    try {
      json = JSON.parse(text);
    } catch {
      throw ApplicationFailure.nonRetryable(`supervisor ${what}: response is not JSON`, FailureType.InvalidResponse);
    }
    const parsed = schema.safeParse(json);
    if (!parsed.success) {
      const issue = parsed.error.issues[0];
      throw ApplicationFailure.nonRetryable(
        `supervisor ${what}: unexpected response (${issue?.path.join('.') || '(root)'}: ${issue?.message})`,
        FailureType.InvalidResponse,
      );
    }
    return parsed.data;
  }

  return {
    status: (baseUrl, opts) => call('GET', baseUrl, 'v1/status', supervisorStatusSchema, undefined, opts),
    gpuMemory: (baseUrl, opts) => call('GET', baseUrl, 'v1/gpu/memory', gpuMemoryReportSchema, undefined, opts),
    sleep: (baseUrl, body, opts) => call('POST', baseUrl, 'v1/vllm/sleep', supervisorActionResponseSchema, body, opts),
    wake: (baseUrl, body, opts) => call('POST', baseUrl, 'v1/vllm/wake', supervisorActionResponseSchema, body, opts),
    startTraining: (baseUrl, body, opts) =>
      call('POST', baseUrl, 'v1/training/start', supervisorActionResponseSchema, body, opts),
    stopTraining: (baseUrl, body, opts) =>
      call('POST', baseUrl, 'v1/training/stop', supervisorActionResponseSchema, body, opts),
    probe: (baseUrl, body, opts) => call('POST', baseUrl, 'v1/probe', probeResponseSchema, body, opts),
    fingerprint: (baseUrl, body, opts) =>
      call('POST', baseUrl, 'v1/fingerprint', fingerprintResponseSchema, body, opts),
    scoreFingerprint: (baseUrl, body, opts) =>
      call('POST', baseUrl, 'v1/fingerprint/score', scoreResponseSchema, body, opts),
  };
}

function httpFailure(what: string, response: Dispatcher.ResponseData, text: string): ApplicationFailure {
  const envelope = (() => {
    try {
      return errorBodySchema.safeParse(JSON.parse(text));
    } catch {
      return null;
    }
  })();
  const detail = envelope?.success ? `${envelope.data.error.code}: ${envelope.data.error.message}` : text.slice(0, 200);
  const status = response.statusCode;
  const message = `supervisor ${what}: HTTP ${status}${detail ? ` (${detail})` : ''}`;
  if (status === 401 || status === 403) {
    return ApplicationFailure.nonRetryable(message, FailureType.Unauthorized);
  }
  if (status >= 500 || status === 429 || status === 408) {
    return ApplicationFailure.create({
      message,
      type: FailureType.SupervisorUnreachable,
      nonRetryable: false,
      nextRetryDelay: retryAfterMs(headerValue(response.headers['retry-after'])),
    });
  }
  return ApplicationFailure.nonRetryable(message, FailureType.InvalidTarget);
}

const headerValue = (value: string | string[] | undefined): string | null =>
  (Array.isArray(value) ? value[0] : value) ?? null;

/** The socket failure behind `err` (undici throws it, fetch wraps it as `cause`): its code and message. */
function describeNetworkError(err: unknown): string {
  const coded = findCause(err, (e) => (typeof e.code === 'string' ? { code: e.code, message: e.message } : undefined));
  if (!coded) return describeCause(err);
  const message = typeof coded.message === 'string' ? coded.message : '';
  if (message.includes(coded.code)) return message;
  return message ? `${coded.code} ${message}` : coded.code;
}
