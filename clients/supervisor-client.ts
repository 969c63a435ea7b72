import {
  type FingerprintRequest,
  type FingerprintResponse,
  fingerprintResponseSchema,
  type ScoreRequest,
  type ScoreResponse,
  scoreResponseSchema,
} from '../schemas/fingerprint';
import { type Dispatcher, request } from 'undici';
import type { z } from 'zod';
import { startDeadline } from '../lib/deadline';
import { describeCause, findCause } from '../lib/error-cause';
import { errorBodySchema } from '../schemas/errors';
import { FailureType } from '../schemas/failures';
import { SupervisorCallError } from './supervisor-call-error';
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
import {
  certificateRejectionHint,
  createSupervisorAccess,
  SupervisorAccessError,
  type SupervisorAccessResolver,
  type SupervisorConnection,
  type SupervisorTarget,
} from './supervisor-access';
import type { SupervisorClientTls } from './supervisor-tls';

/** Per-call options: the activity's cancellation signal and a timeout for this one request. */
export interface SupervisorRequestOptions {
  signal?: AbortSignal;
  timeoutMs?: number;
}

/**
 * The supervisor HTTP API (docs/architecture.md §6.2) as typed calls to one domain's supervisor (its URL, CA
 * and token as the layout's `supervisor` block and the fleet-wide settings say). Every method either returns
 * a parsed response or throws a SupervisorCallError whose `type` says what to do about it (the worker turns it
 * into the ApplicationFailure of the same type, activities/supervisor-client.ts):
 * - `SupervisorMisconfigured` (non-retryable): the domain's settings cannot work (plain HTTP off loopback
 *   without `insecure: true`, an unset token variable, an unreadable token or CA file);
 * - `Unauthorized` (non-retryable): 401/403, the token is wrong or missing;
 * - `SupervisorUnreachable` (retryable): connection error, timeout, 5xx or 429 (`nextRetryDelay` from Retry-After);
 * - `InvalidTarget` (non-retryable): any other 4xx, the request names something the host does not have;
 * - `InvalidResponse` (non-retryable): a 2xx whose body does not match its schema.
 * When `signal` aborts, its reason (the activity's CancelledFailure) is thrown instead.
 */
export interface SupervisorClient {
  status(target: SupervisorTarget, opts?: SupervisorRequestOptions): Promise<SupervisorStatus>;
  /**
   * `maxAgeMs`: the host's last reading may be reused when it is at most this old (the wake's re-check); `since`:
   * a reading started at or after this time of the host's own clock (the release step, after a trainer's end).
   */
  gpuMemory(
    target: SupervisorTarget,
    opts?: SupervisorRequestOptions & { maxAgeMs?: number; since?: string },
  ): Promise<GpuMemoryReport>;
  sleep(
    target: SupervisorTarget,
    body: SleepRequest,
    opts?: SupervisorRequestOptions,
  ): Promise<SupervisorActionResponse>;
  wake(target: SupervisorTarget, body: WakeRequest, opts?: SupervisorRequestOptions): Promise<SupervisorActionResponse>;
  startTraining(
    target: SupervisorTarget,
    body: TrainingStartRequest,
    opts?: SupervisorRequestOptions,
  ): Promise<SupervisorActionResponse>;
  stopTraining(
    target: SupervisorTarget,
    body: TrainingStopRequest,
    opts?: SupervisorRequestOptions,
  ): Promise<SupervisorActionResponse>;
  probe(target: SupervisorTarget, body: ProbeRequest, opts?: SupervisorRequestOptions): Promise<ProbeResponse>;
  /** Each model's greedy answer to a prompt with its token logprobs (`POST /v1/fingerprint`). */
  fingerprint(
    target: SupervisorTarget,
    body: FingerprintRequest,
    opts?: SupervisorRequestOptions,
  ): Promise<FingerprintResponse>;
  /** How each model scores a stored answer (`POST /v1/fingerprint/score`). */
  scoreFingerprint(
    target: SupervisorTarget,
    body: ScoreRequest,
    opts?: SupervisorRequestOptions,
  ): Promise<ScoreResponse>;
}

export interface SupervisorClientOptions {
  /**
   * Each domain's token and connection (one keep-alive Agent per CA, so a monitor's polls reuse their
   * connection to each supervisor). By default one made from `token` and `tls`.
   */
  access?: SupervisorAccessResolver;
  /** Bearer token (HARU_SUPERVISOR_TOKEN) of domains naming no source of their own; none when absent. */
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

/** A response that came after its call's deadline: its body is read off so the connection can be reused. */
const releaseLate = (late: Dispatcher.ResponseData) => void late.body.dump().catch(() => undefined);

const joinUrl = (baseUrl: string, path: string): string =>
  new URL(path, baseUrl.endsWith('/') ? baseUrl : `${baseUrl}/`).toString();

/** The query of `GET /v1/gpu/memory` (empty: a reading run now, or the one in flight). */
function gpuMemoryQuery(opts: { maxAgeMs?: number; since?: string }): string {
  const params = new URLSearchParams();
  if (opts.maxAgeMs) params.set('maxAgeMs', String(opts.maxAgeMs));
  if (opts.since) params.set('since', opts.since);
  const query = params.toString();
  return query ? `?${query}` : '';
}

/**
 * Creates the client. Calls go through undici's `request` (not `fetch`, whose WHATWG Request, Response and
 * stream objects cost about three times the CPU per call: the fleet monitor makes several calls a second
 * per fleet).
 */
export function createSupervisorClient(options: SupervisorClientOptions = {}): SupervisorClient {
  const defaultTimeoutMs = options.defaultTimeoutMs ?? 10_000;
  const access = options.access ?? createSupervisorAccess({ token: options.token, tls: options.tls });
  // Each domain's URL of each path, joined once: the monitor calls the same few several times a second.
  const urls = new Map<string, string>();
  const urlOf = (baseUrl: string, path: string): string => {
    const key = `${baseUrl}\n${path}`;
    let url = urls.get(key);
    if (url === undefined) urls.set(key, (url = joinUrl(baseUrl, path)));
    return url;
  };

  async function call<S extends z.ZodType>(
    method: 'GET' | 'POST',
    target: SupervisorTarget,
    path: string,
    schema: S,
    body: unknown,
    opts: SupervisorRequestOptions = {},
  ): Promise<z.infer<S>> {
    let connection: SupervisorConnection;
    try {
      connection = access.connect(target);
    } catch (err) {
      if (!(err instanceof SupervisorAccessError)) throw err;
      throw new SupervisorCallError(err.message, FailureType.SupervisorMisconfigured, {
        details: { domain: target.slug },
      });
    }
    const url = urlOf(target.supervisorUrl, path);
    const what = `${method} ${url}`;
    const timeoutMs = opts.timeoutMs ?? defaultTimeoutMs;
    const deadline = startDeadline(timeoutMs, opts.signal);
    const headers: Record<string, string> = { accept: 'application/json' };
    if (body !== undefined) headers['content-type'] = 'application/json';
    if (connection.token) headers.authorization = `Bearer ${connection.token}`;
    let response: Dispatcher.ResponseData;
    let text: string;
    try {
      response = await deadline.bound(
        request(url, {
          method,
          headers,
          body: body === undefined ? undefined : JSON.stringify(body),
          signal: deadline.signal,
          dispatcher: connection.dispatcher,
        }),
        releaseLate,
      );
      text = await response.body.text();
    } catch (err) {
      if (opts.signal?.aborted) throw opts.signal.reason ?? err;
      const reason = deadline.isTimedOut()
        ? `timed out after ${timeoutMs} ms`
        : describeNetworkError(err) + certificateRejectionHint(errorCode(err), target);
      throw new SupervisorCallError(`supervisor ${what}: ${reason}`, FailureType.SupervisorUnreachable);
    } finally {
      deadline.clear();
    }
    if (response.statusCode < 200 || response.statusCode > 299) throw httpFailure(what, response, text);
    let json: unknown;
    try {
      json = JSON.parse(text);
    } catch {
      throw new SupervisorCallError(`supervisor ${what}: response is not JSON`, FailureType.InvalidResponse);
    }
    const parsed = schema.safeParse(json);
    if (!parsed.success) {
      const issue = parsed.error.issues[0];
      throw new SupervisorCallError(
        `supervisor ${what}: unexpected response (${issue?.path.join('.') || '(root)'}: ${issue?.message})`,
        FailureType.InvalidResponse,
      );
    }
    return parsed.data;
  }

  return {
    status: (target, opts) => call('GET', target, 'v1/status', supervisorStatusSchema, undefined, opts),
    gpuMemory: (target, opts) =>
      call('GET', target, `v1/gpu/memory${gpuMemoryQuery(opts ?? {})}`, gpuMemoryReportSchema, undefined, opts),
    sleep: (target, body, opts) => call('POST', target, 'v1/vllm/sleep', supervisorActionResponseSchema, body, opts),
    wake: (target, body, opts) => call('POST', target, 'v1/vllm/wake', supervisorActionResponseSchema, body, opts),
    startTraining: (target, body, opts) =>
      call('POST', target, 'v1/training/start', supervisorActionResponseSchema, body, opts),
    stopTraining: (target, body, opts) =>
      call('POST', target, 'v1/training/stop', supervisorActionResponseSchema, body, opts),
    probe: (target, body, opts) => call('POST', target, 'v1/probe', probeResponseSchema, body, opts),
    fingerprint: (target, body, opts) => call('POST', target, 'v1/fingerprint', fingerprintResponseSchema, body, opts),
    scoreFingerprint: (target, body, opts) =>
      call('POST', target, 'v1/fingerprint/score', scoreResponseSchema, body, opts),
  };
}

function httpFailure(what: string, response: Dispatcher.ResponseData, text: string): SupervisorCallError {
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
  if (status === 401 || status === 403) return new SupervisorCallError(message, FailureType.Unauthorized);
  if (status >= 500 || status === 429 || status === 408) {
    return new SupervisorCallError(message, FailureType.SupervisorUnreachable, {
      retryAfterMs: retryAfterMs(headerValue(response.headers['retry-after'])),
    });
  }
  return new SupervisorCallError(message, FailureType.InvalidTarget);
}

const headerValue = (value: string | string[] | undefined): string | null =>
  (Array.isArray(value) ? value[0] : value) ?? null;

/** The code of the failure behind `err`, if any. */
const errorCode = (err: unknown): string | undefined =>
  findCause(err, (e) => (typeof e.code === 'string' ? e.code : undefined));

/** The socket failure behind `err` (undici throws it, fetch wraps it as `cause`): its code and message. */
function describeNetworkError(err: unknown): string {
  const coded = findCause(err, (e) => (typeof e.code === 'string' ? { code: e.code, message: e.message } : undefined));
  if (!coded) return describeCause(err);
  const message = typeof coded.message === 'string' ? coded.message : '';
  if (message.includes(coded.code)) return message;
  return message ? `${coded.code} ${message}` : coded.code;
}
