import { type FailureType, NON_RETRYABLE_FAILURES } from '../schemas/failures';

/** The ways a supervisor call fails, named as the failure types the worker's activities throw for them. */
export type SupervisorCallFailure =
  | typeof FailureType.SupervisorMisconfigured
  | typeof FailureType.Unauthorized
  | typeof FailureType.SupervisorUnreachable
  | typeof FailureType.InvalidTarget
  | typeof FailureType.InvalidResponse;

/**
 * A supervisor call that failed, free of any Temporal type so that the API can make the same calls: `type`
 * says what to do about it, `isRetryable` whether a repeat may succeed (only SupervisorUnreachable),
 * `retryAfterMs` what the supervisor's Retry-After asked for. The worker maps it to an ApplicationFailure
 * (activities/supervisor-client.ts).
 */
export class SupervisorCallError extends Error {
  readonly isRetryable: boolean;
  readonly retryAfterMs: number | undefined;
  readonly details: Record<string, unknown> | undefined;

  constructor(
    message: string,
    readonly type: SupervisorCallFailure,
    opts: { retryAfterMs?: number; details?: Record<string, unknown> } = {},
  ) {
    super(message);
    this.name = 'SupervisorCallError';
    this.isRetryable = !NON_RETRYABLE_FAILURES.includes(type);
    this.retryAfterMs = opts.retryAfterMs;
    this.details = opts.details;
  }
}
