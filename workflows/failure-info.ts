import {
  ActivityFailure,
  ApplicationFailure,
  CancelledFailure,
  ChildWorkflowFailure,
  TimeoutFailure,
} from '@temporalio/workflow';
import { FailureType } from '../schemas/failures';

/** A failure reduced to what an operation row and the progress query show. */
export interface FailureInfo {
  /** The ApplicationFailure type, `Timeout`, `Cancelled`, or `Error`. */
  code: string;
  message: string;
  /** The attempt reported by the failure, when it carried one. */
  attempts?: number;
  /** For a `Timeout`: the ApplicationFailure type of the last attempt's error, when it had one. */
  lastErrorType?: string;
}

/** True when the step failed because the host's supervisor never answered (at once, or until its budget ran out). */
export const isHostUnreachable = (info: FailureInfo): boolean =>
  info.code === FailureType.SupervisorUnreachable || info.lastErrorType === FailureType.SupervisorUnreachable;

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
    const last = cause.failure?.cause as
      { message?: string | null; applicationFailureInfo?: { type?: string | null } | null } | null | undefined;
    const what = [waitingFor(cause.lastHeartbeatDetails), last?.message && `last error: ${last.message}`].filter(
      Boolean,
    );
    const lastErrorType = last?.applicationFailureInfo?.type;
    return {
      code: 'Timeout',
      message: `step budget spent (${cause.timeoutType ?? 'timeout'})${what.length ? `: ${what.join('; ')}` : ''}`,
      ...(lastErrorType ? { lastErrorType } : {}),
    };
  }
  if (cause instanceof CancelledFailure) return { code: 'Cancelled', message: cause.message || 'cancelled' };
  return { code: 'Error', message: cause instanceof Error ? cause.message : String(cause) };
}
