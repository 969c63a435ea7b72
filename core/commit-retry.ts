import { ABORTED_ERROR_CODE, FailureType, NON_RETRYABLE_FAILURES } from '../schemas/failures';
import type { FleetPolicy } from '../schemas/policy';

/**
 * The commit's outage budget of a policy recorded before `commitOutageBudgetMs` existed (the schema's default):
 * such a policy arrives in workflow input without the field.
 */
export const DEFAULT_COMMIT_OUTAGE_BUDGET_MS = 300_000;

/** A step of the promotion's commit that failed without moving routing (the operation row says so). */
export interface FailedCommitStep {
  /** `commitRouting`, or `probeModels` when the target was being probed again before another commit. */
  step: string;
  /** The reduced failure (workflows/failure-info.ts): a failure type, `Timeout`, `Cancelled`, `Aborted`, `Error`. */
  code: string;
  /** For a `Timeout`: the failure type of the last attempt's error, when it had one. */
  lastErrorType?: string;
  /** From the commit's first attempt to the store's answer after this failure, in ms (workflow time). */
  waitedMs: number;
}

/**
 * What the promotion does after a failed commit step: probe the target again and commit again, or compensate.
 * `reason` says why an outage ended in compensation (null when the failure itself says it).
 */
export type FailedCommitNext = { action: 'commitAgain' } | { action: 'compensate'; reason: string | null };

const STORE_FAILURES: readonly string[] = [FailureType.StateStoreError, FailureType.StoreUnavailable];

/** The failure type behind a reduced failure: the last attempt's for a budget spent retrying. */
const typeOf = (f: Pick<FailedCommitStep, 'code' | 'lastErrorType'>): string | undefined =>
  f.code === 'Timeout' ? f.lastErrorType : f.code;

/**
 * Whether the step never got an answer: its budget went on errors a retry could cure. For the commit, any
 * retryable error (an unreachable or busy store, a worker that died); a lost CAS, a closed operation, an
 * abort or a cancellation is an answer. For a repeated probe, only the store's own errors: a host that did
 * not answer, or answered wrong, is the target failing and is compensated.
 */
export function isUnanswered(f: Pick<FailedCommitStep, 'step' | 'code' | 'lastErrorType'>): boolean {
  if (f.code === 'Cancelled' || f.code === ABORTED_ERROR_CODE) return false;
  const type = typeOf(f);
  if (f.step === 'commitRouting') return !(NON_RETRYABLE_FAILURES as readonly string[]).includes(type ?? '');
  return type !== undefined && STORE_FAILURES.includes(type);
}

/**
 * Decides the next move after a commit step that failed without moving routing (docs/architecture.md §4.3).
 * An unanswered step is tried again while the store answered within the policy's `commitOutageBudgetMs` of the
 * first commit attempt: the target stays woken and probed, and is probed once more before the next commit
 * (its last proof is at least a commit budget old). Anything else, or an outage past the budget, compensates.
 * Pure.
 */
export function afterFailedCommit(
  failed: FailedCommitStep,
  policy: Pick<FleetPolicy, 'commitOutageBudgetMs'>,
): FailedCommitNext {
  if (!isUnanswered(failed)) return { action: 'compensate', reason: null };
  // A policy recorded before the field existed has none.
  const budgetMs = policy.commitOutageBudgetMs ?? DEFAULT_COMMIT_OUTAGE_BUDGET_MS;
  if (failed.waitedMs <= budgetMs) return { action: 'commitAgain' };
  return {
    action: 'compensate',
    reason: `the state store answered ${Math.round(failed.waitedMs / 1000)} s after the commit began, past its outage budget (commitOutageBudgetMs ${budgetMs} ms)`,
  };
}
