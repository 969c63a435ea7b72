/**
 * ApplicationFailure types thrown by activities and checked by workflows. Types listed in
 * NON_RETRYABLE_FAILURES are also put in `retry.nonRetryableErrorTypes`.
 */
export const FailureType = {
  /** The supervisor did not answer or answered 5xx: retryable. */
  SupervisorUnreachable: 'SupervisorUnreachable',
  /** The supervisor refused our token (401/403): non-retryable, a human must fix the secret. */
  Unauthorized: 'Unauthorized',
  /**
   * A domain's supervisor settings cannot work (plain HTTP off loopback without `insecure: true`, a token
   * variable that is unset, a token or CA file that cannot be read): non-retryable, the message names the field.
   */
  SupervisorMisconfigured: 'SupervisorMisconfigured',
  /** A peer answered with a body that does not match its schema: non-retryable. */
  InvalidResponse: 'InvalidResponse',
  /** The pointer moved under us (lost CAS): non-retryable. */
  RouteConflict: 'RouteConflict',
  /** The domain is not in the fleet, is the active, or cannot serve: non-retryable. */
  InvalidTarget: 'InvalidTarget',
  /** A model answered with an error or empty content: non-retryable. */
  ProbeFailed: 'ProbeFailed',
  /** A condition was not reached yet (training still running, VRAM still held, model still asleep): retryable. */
  NotYet: 'NotYet',
  /** The state store could not do it now (a row lock held by another transaction): retryable. */
  StoreUnavailable: 'StoreUnavailable',
  /** The state store refused a transition (row not in an allowed predecessor state): non-retryable. */
  StateConflict: 'StateConflict',
  /**
   * What a step depends on no longer holds when it runs (training running again on a GPU a wake would
   * use, after a restart resumed the promotion): non-retryable, the promotion compensates.
   */
  PreconditionLost: 'PreconditionLost',
  /** The operation was cancelled or finished by someone else: non-retryable. */
  OperationClosed: 'OperationClosed',
  /** `sky launch` / `sky serve up` failed, or the launched cluster or service vanished: non-retryable. */
  LaunchFailed: 'LaunchFailed',
  /** A `sky` command other than a launch failed (status, stop, down): retryable within the step budget. */
  SkyCommandFailed: 'SkyCommandFailed',
  /** This worker has no `sky` CLI configured: non-retryable. */
  ProvisioningUnavailable: 'ProvisioningUnavailable',
  /** A state store statement failed (the message is the database's, the SQL only in the worker log): retryable. */
  StateStoreError: 'StateStoreError',
  /**
   * A provisioning workflow's own outcome: a step failed and the domain is `failed`; the details carry the
   * step and the step's failure `{step, code, message}`.
   */
  ProvisioningFailed: 'ProvisioningFailed',
  /** A teardown workflow's own outcome: the machines could not be taken down and the domain is `failed`. */
  TeardownFailed: 'TeardownFailed',
} as const;
export type FailureType = (typeof FailureType)[keyof typeof FailureType];

export const NON_RETRYABLE_FAILURES: readonly FailureType[] = [
  FailureType.Unauthorized,
  FailureType.SupervisorMisconfigured,
  FailureType.InvalidResponse,
  FailureType.RouteConflict,
  FailureType.InvalidTarget,
  FailureType.ProbeFailed,
  FailureType.StateConflict,
  FailureType.OperationClosed,
  FailureType.PreconditionLost,
  FailureType.LaunchFailed,
  FailureType.ProvisioningUnavailable,
];

/**
 * The `code` on the error of an operation an operator aborted, whether its workflow ended it or the API
 * closed a row whose workflow never started. Rows the API closed before both wrote it carry `aborted`.
 */
export const ABORTED_ERROR_CODE = 'Aborted';
