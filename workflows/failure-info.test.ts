import {
  ActivityFailure,
  ApplicationFailure,
  CancelledFailure,
  RetryState,
  TimeoutFailure,
  TimeoutType,
} from '@temporalio/common';
import { describeFailure, isHostUnreachable } from './failure-info';

const activityFailure = (cause: Error) =>
  new ActivityFailure('activity failed', 'wakeModels', '1', RetryState.NON_RETRYABLE_FAILURE, 'worker', cause);

describe('describeFailure', () => {
  it('reduces an activity failure to its ApplicationFailure type and message', () => {
    expect(
      describeFailure(activityFailure(ApplicationFailure.nonRetryable('model llama failed its probe', 'ProbeFailed'))),
    ).toEqual({
      code: 'ProbeFailed',
      message: 'model llama failed its probe',
    });
  });

  it('names what a timed-out step was waiting for, from its last heartbeat', () => {
    const timeout = new TimeoutFailure(
      'timeout',
      { waitingFor: 'models not awake: llama (asleep)' },
      TimeoutType.SCHEDULE_TO_CLOSE,
    );
    expect(describeFailure(activityFailure(timeout))).toEqual({
      code: 'Timeout',
      message: `step budget spent (${TimeoutType.SCHEDULE_TO_CLOSE}): models not awake: llama (asleep)`,
    });
  });

  it('adds the last attempt error a timeout carries', () => {
    const timeout = new TimeoutFailure('timeout', undefined, TimeoutType.SCHEDULE_TO_CLOSE);
    timeout.failure = { message: 'timeout', cause: { message: 'HTTP 503' } };
    expect(describeFailure(activityFailure(timeout)).message).toBe(
      `step budget spent (${TimeoutType.SCHEDULE_TO_CLOSE}): last error: HTTP 503`,
    );
  });

  it('keeps the type of the last attempt a timeout carries, so an unreachable host is told from a slow one', () => {
    const timeout = new TimeoutFailure('timeout', undefined, TimeoutType.SCHEDULE_TO_CLOSE);
    timeout.failure = {
      message: 'timeout',
      cause: { message: 'connect ECONNREFUSED', applicationFailureInfo: { type: 'SupervisorUnreachable' } },
    };
    const info = describeFailure(activityFailure(timeout));
    expect(info.lastErrorType).toBe('SupervisorUnreachable');
    expect(isHostUnreachable(info)).toBe(true);
    expect(isHostUnreachable({ code: 'SupervisorUnreachable', message: 'down' })).toBe(true);
    expect(isHostUnreachable({ code: 'Timeout', message: 'slow', lastErrorType: 'NotYet' })).toBe(false);
    expect(isHostUnreachable({ code: 'ProbeFailed', message: 'empty' })).toBe(false);
  });

  it('reports a cancellation and any other error', () => {
    expect(describeFailure(activityFailure(new CancelledFailure('CANCELLED')))).toEqual({
      code: 'Cancelled',
      message: 'CANCELLED',
    });
    expect(describeFailure(new Error('boom'))).toEqual({ code: 'Error', message: 'boom' });
  });
});
