import { FailureType } from '../schemas/failures';
import { defaultFleetPolicy } from '../schemas/policy';
import { afterFailedCommit, DEFAULT_COMMIT_OUTAGE_BUDGET_MS, isUnanswered } from './commit-retry';

const policy = { commitOutageBudgetMs: 60_000 };
const commit = (code: string, lastErrorType?: string, waitedMs = 20_000) => ({
  step: 'commitRouting',
  code,
  ...(lastErrorType ? { lastErrorType } : {}),
  waitedMs,
});
const probe = (code: string, lastErrorType?: string, waitedMs = 20_000) => ({
  ...commit(code, lastErrorType, waitedMs),
  step: 'probeModels',
});

describe('afterFailedCommit', () => {
  it('commits again after a commit whose budget went on an unreachable store', () => {
    expect(afterFailedCommit(commit('Timeout', FailureType.StateStoreError), policy)).toEqual({
      action: 'commitAgain',
    });
  });

  it('commits again after a budget spent on a held fleet row, on untyped errors or on a dead worker', () => {
    for (const failed of [
      commit('Timeout', FailureType.StoreUnavailable),
      commit('Timeout', 'Error'),
      commit('Timeout'),
      commit(FailureType.StateStoreError),
    ]) {
      expect(afterFailedCommit(failed, policy)).toEqual({ action: 'commitAgain' });
    }
  });

  it('compensates a lost CAS, a closed operation or an invalid target at once, however short the wait', () => {
    for (const code of [FailureType.RouteConflict, FailureType.OperationClosed, FailureType.InvalidTarget]) {
      expect(afterFailedCommit(commit(code, undefined, 10), policy)).toEqual({ action: 'compensate', reason: null });
    }
  });

  it('compensates a cancelled or aborted commit', () => {
    expect(afterFailedCommit(commit('Cancelled'), policy).action).toBe('compensate');
    expect(afterFailedCommit(commit('Aborted'), policy).action).toBe('compensate');
  });

  it('commits again up to the outage budget and compensates past it, saying why', () => {
    expect(afterFailedCommit(commit('Timeout', FailureType.StateStoreError, 60_000), policy)).toEqual({
      action: 'commitAgain',
    });
    expect(afterFailedCommit(commit('Timeout', FailureType.StateStoreError, 60_001), policy)).toEqual({
      action: 'compensate',
      reason:
        'the state store answered 60 s after the commit began, past its outage budget (commitOutageBudgetMs 60000 ms)',
    });
  });

  it('probes again after a repeated probe that failed on the store, never after the target failed it', () => {
    expect(afterFailedCommit(probe('Timeout', FailureType.StateStoreError), policy).action).toBe('commitAgain');
    expect(afterFailedCommit(probe(FailureType.StoreUnavailable), policy).action).toBe('commitAgain');
    for (const failed of [
      probe(FailureType.ProbeFailed),
      probe('Timeout', FailureType.SupervisorUnreachable),
      probe('Timeout'),
      probe(FailureType.Unauthorized),
    ]) {
      expect(afterFailedCommit(failed, policy)).toEqual({ action: 'compensate', reason: null });
    }
  });

  it('gives a policy recorded before the field the schema default', () => {
    expect(DEFAULT_COMMIT_OUTAGE_BUDGET_MS).toBe(defaultFleetPolicy().commitOutageBudgetMs);
    const old = {} as { commitOutageBudgetMs: number };
    expect(afterFailedCommit(commit('Timeout', undefined, DEFAULT_COMMIT_OUTAGE_BUDGET_MS), old).action).toBe(
      'commitAgain',
    );
    expect(afterFailedCommit(commit('Timeout', undefined, DEFAULT_COMMIT_OUTAGE_BUDGET_MS + 1), old).action).toBe(
      'compensate',
    );
  });
});

describe('isUnanswered', () => {
  it('counts every retryable commit failure and only the store failures of a probe', () => {
    expect(isUnanswered(commit('Timeout', FailureType.StoreUnavailable))).toBe(true);
    expect(isUnanswered(probe('Timeout', FailureType.SupervisorUnreachable))).toBe(false);
    expect(isUnanswered(probe('Timeout', FailureType.StateStoreError))).toBe(true);
  });
});
