import { z } from 'zod';
import { describeCause } from '../lib/error-cause';
import { errorBodySchema } from '../schemas/errors';

/**
 * The CLI's variables: `HARU_URL` and `HARU_API_TOKEN` (below a `--server`/`--token` flag, above the config
 * file's context; cli/connection.ts) and `HARU_CONFIG`, the config file's path (cli/config-file.ts).
 */
export const cliEnvSchema = z.object({
  HARU_URL: z.preprocess(
    (v) => (typeof v === 'string' && v.trim() === '' ? undefined : v),
    z.url({ protocol: /^https?$/, error: 'HARU_URL must be an http(s) URL' }).optional(),
  ),
  HARU_API_TOKEN: z.preprocess(
    (v) => (typeof v === 'string' && v.trim() === '' ? undefined : v),
    z.string().optional(),
  ),
  HARU_CONFIG: z.preprocess((v) => (typeof v === 'string' && v.trim() === '' ? undefined : v), z.string().optional()),
});
export type CliEnv = z.infer<typeof cliEnvSchema>;

/** An error answered by the API: printed as `<code>: <message>`, never as a stack trace. */
export class ApiError extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
  ) {
    super(`${code}: ${message}`);
    this.name = 'ApiError';
  }
}

export interface ApiClient {
  get<T>(path: string, schema: z.ZodType<T>): Promise<T>;
  post<T>(path: string, body: unknown, schema: z.ZodType<T>): Promise<{ status: number; body: T }>;
  /** Opens a GET returning a streaming Response (SSE). */
  stream(path: string, signal?: AbortSignal): Promise<Response>;
  baseUrl: string;
}

/** Where the client sends its calls: the API's base URL, the token if any, and where the URL came from. */
export interface ApiTarget {
  HARU_URL: string;
  HARU_API_TOKEN?: string;
  /** Named in the message for an unreachable API (`--server`, `HARU_URL`, a context); default `HARU_URL`. */
  serverFrom?: string;
}

/** A small JSON client for the Haru API; every answer is checked against its schema. */
export function createApiClient(env: ApiTarget, fetchImpl: typeof fetch = fetch): ApiClient {
  const baseUrl = env.HARU_URL.replace(/\/+$/, '');
  const headers = (extra: Record<string, string> = {}) => ({
    accept: 'application/json',
    ...(env.HARU_API_TOKEN ? { authorization: `Bearer ${env.HARU_API_TOKEN}` } : {}),
    ...extra,
  });
  async function call(method: string, path: string, body?: unknown, signal?: AbortSignal): Promise<Response> {
    try {
      return await fetchImpl(`${baseUrl}${path}`, {
        method,
        headers: headers(body === undefined ? {} : { 'content-type': 'application/json' }),
        body: body === undefined ? undefined : JSON.stringify(body),
        signal,
      });
    } catch (err) {
      throw new ApiError(
        0,
        'api_unreachable',
        `cannot reach the Haru API at ${baseUrl} (${describeCause(err)}); is \`haru api\` or \`haru dev\` running? (${env.serverFrom ?? 'HARU_URL'})`,
      );
    }
  }
  async function decode<T>(res: Response, schema: z.ZodType<T>): Promise<T> {
    const text = await res.text();
    let json: unknown;
    try {
      json = text ? JSON.parse(text) : null;
    } catch {
      throw new ApiError(res.status, 'invalid_response', `the API answered ${res.status} with a non-JSON body`);
    }
    if (!res.ok) {
      const parsed = errorBodySchema.safeParse(json);
      if (parsed.success) throw new ApiError(res.status, parsed.data.error.code, parsed.data.error.message);
      throw new ApiError(res.status, 'http_error', `the API answered ${res.status}`);
    }
    const parsed = schema.safeParse(json);
    if (!parsed.success)
      throw new ApiError(res.status, 'invalid_response', `unexpected answer from the API: ${parsed.error.message}`);
    return parsed.data;
  }
  return {
    baseUrl,
    async get(path, schema) {
      return decode(await call('GET', path), schema);
    },
    async post(path, body, schema) {
      const res = await call('POST', path, body);
      return { status: res.status, body: await decode(res, schema) };
    },
    async stream(path, signal) {
      const res = await call('GET', path, undefined, signal);
      if (!res.ok) await decode(res, z.unknown());
      return res;
    },
  };
}
