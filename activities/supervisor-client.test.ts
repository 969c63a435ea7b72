import { ApplicationFailure, CancelledFailure } from '@temporalio/common';
import { SupervisorCallError } from '../clients/supervisor-call-error';
import { FailureType } from '../schemas/failures';
import { freePort } from '../test/support/ports';
import { createSupervisorClient, toActivityFailure } from './supervisor-client';

describe("the worker's supervisor client", () => {
  it('throws each failed call as the ApplicationFailure of its type, retryable only when the call was', () => {
    const unreachable = toActivityFailure(
      new SupervisorCallError('supervisor GET x: HTTP 503', FailureType.SupervisorUnreachable, { retryAfterMs: 2_000 }),
    );
    expect(unreachable).toBeInstanceOf(ApplicationFailure);
    expect(unreachable).toMatchObject({
      message: 'supervisor GET x: HTTP 503',
      type: FailureType.SupervisorUnreachable,
      nonRetryable: false,
      nextRetryDelay: 2_000,
    });
    const misconfigured = toActivityFailure(
      new SupervisorCallError('domain east: supervisor.tokenEnv: T is not set', FailureType.SupervisorMisconfigured, {
        details: { domain: 'east' },
      }),
    );
    expect(misconfigured).toMatchObject({
      type: FailureType.SupervisorMisconfigured,
      nonRetryable: true,
      details: [{ domain: 'east' }],
    });
    for (const type of [FailureType.Unauthorized, FailureType.InvalidTarget, FailureType.InvalidResponse] as const) {
      expect(toActivityFailure(new SupervisorCallError('no', type))).toMatchObject({ type, nonRetryable: true });
    }
  });

  it("passes anything else through as it came (the activity's cancellation)", () => {
    const cancelled = new CancelledFailure('CANCELLED');
    expect(toActivityFailure(cancelled)).toBe(cancelled);
  });

  it('throws an ApplicationFailure from a real call that fails', async () => {
    const call = createSupervisorClient().status({
      slug: 'east',
      supervisorUrl: `http://127.0.0.1:${await freePort()}/`,
    });
    const err = await call.then(
      () => null,
      (e: unknown) => e,
    );
    expect(err).toBeInstanceOf(ApplicationFailure);
    expect(err).toMatchObject({ type: FailureType.SupervisorUnreachable, nonRetryable: false });
  });
});
