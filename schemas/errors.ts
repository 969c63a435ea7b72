import { z } from 'zod';

/** Every error code the API and supervisor answer with, and the HTTP status each maps to. */
export const ERROR_STATUS = {
  unauthorized: 401,
  /** An API key without the scope a route needs, or limited to other fleets. */
  forbidden: 403,
  invalid_request: 400,
  fleet_not_found: 404,
  domain_not_found: 404,
  operation_not_found: 404,
  training_job_not_found: 404,
  not_found: 404,
  invalid_target: 422,
  operation_conflict: 409,
  /** A training job's state machine refused the change (cancelling a finished job). */
  training_job_conflict: 409,
  model_not_found: 404,
  no_active_domain: 503,
  domain_unavailable: 503,
  upstream_timeout: 504,
  upstream_unreachable: 502,
  payload_too_large: 413,
  overloaded: 429,
  state_store_unavailable: 503,
  orchestrator_unavailable: 503,
  /** The worker's own probes: its Temporal worker is not polling (starting, draining, stopped). */
  worker_not_running: 503,
  internal_error: 500,
} as const;
export type ErrorCode = keyof typeof ERROR_STATUS;
export const ErrorCode = Object.fromEntries(Object.keys(ERROR_STATUS).map((k) => [k, k])) as {
  readonly [K in ErrorCode]: K;
};
export const errorCodeSchema = z.enum(Object.keys(ERROR_STATUS) as [ErrorCode, ...ErrorCode[]]);

/** The one error envelope: `{ "error": { "code", "message" } }`. */
export const errorBodySchema = z.object({
  error: z.object({ code: errorCodeSchema, message: z.string() }),
});
export type ErrorBody = z.infer<typeof errorBodySchema>;

/** An error that knows its API code; the error middleware turns it into the envelope and status. */
export class HaruError extends Error {
  constructor(
    readonly code: ErrorCode,
    message: string,
    readonly details?: Record<string, unknown>,
  ) {
    super(message);
    this.name = 'HaruError';
  }
  get status(): number {
    return ERROR_STATUS[this.code];
  }
  toBody(): ErrorBody {
    return { error: { code: this.code, message: this.message } };
  }
}
