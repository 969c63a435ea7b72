import {
  ActivityFailure,
  ApplicationFailure,
  CancelledFailure,
  ChildWorkflowFailure,
  TimeoutFailure,
} from '@temporalio/workflow';

/** A failure reduced to what an operation row and the progress query show. */
export interface FailureInfo {
  /** The ApplicationFailure type, `Timeout`, `Cancelled`, or `Error`. */
  code: string;
  message: string;
  /** The attempt reported by the failure, when it carried one. */
  attempts?: number;
}

const waitingFor = (details: unknown): string | null =>
  typeof details === 'object' &&
  details !== null &&
  typeof (details as { waitingFor?: unknown }).waitingFor === 'string'
    ? (details as { waitingFor: string }).waitingFor
    : null;

/**
 * Describes why an activity or child workflow failed. A timeout names what the activity was still
 * waiting for (from its last heartbeat) or else the last attempt's error, so "wakeModels: Timeout" reads
 * "models not awake: llama (asleep)".
 */
export function describeFailure(err: unknown): FailureInfo {
  let cause: unknown = err;
  while (cause instanceof ActivityFailure || cause instanceof ChildWorkflowFailure) {
    if (!cause.cause) break;
    cause = cause.cause;
  }
  if (cause instanceof ApplicationFailure) {
    return { code: cause.type ?? 'ApplicationFailure', message: cause.message };
  }
  if (cause instanceof TimeoutFailure) {
    // The raw failure keeps the last attempt's error as its cause (a budget spent retrying a refusal).
    const lastAttempt = (cause.failure?.cause as { message?: string | null } | null | undefined)?.message;
    const what = [waitingFor(cause.lastHeartbeatDetails), lastAttempt && `last error: ${lastAttempt}`].filter(Boolean);
    return {
      code: 'Timeout',
      message: `step budget spent (${cause.timeoutType ?? 'timeout'})${what.length ? `: ${what.join('; ')}` : ''}`,
    };
  }
  if (cause instanceof CancelledFailure) return { code: 'Cancelled', message: cause.message || 'cancelled' };
  return { code: 'Error', message: cause instanceof Error ? cause.message : String(cause) };
}
