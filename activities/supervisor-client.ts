import { ApplicationFailure } from '@temporalio/common';
import { SupervisorCallError } from '../clients/supervisor-call-error';
import {
  createSupervisorClient as createPlainSupervisorClient,
  type SupervisorClient,
  type SupervisorClientOptions,
} from '../clients/supervisor-client';

export type { SupervisorClient, SupervisorClientOptions, SupervisorRequestOptions } from '../clients/supervisor-client';

/**
 * A failed supervisor call as the failure a workflow sees: the SupervisorCallError's type, retryable only when
 * it is (with `nextRetryDelay` from the supervisor's Retry-After). Anything else (the activity's cancellation)
 * is returned as it came.
 */
export function toActivityFailure(err: unknown): unknown {
  if (!(err instanceof SupervisorCallError)) return err;
  return ApplicationFailure.create({
    message: err.message,
    type: err.type,
    nonRetryable: !err.isRetryable,
    nextRetryDelay: err.retryAfterMs,
    details: err.details === undefined ? undefined : [err.details],
  });
}

/**
 * The worker's supervisor client (clients/supervisor-client.ts): the same calls, each failure thrown as the
 * ApplicationFailure of its type (see {@link toActivityFailure}), as activities must.
 */
export function createSupervisorClient(options: SupervisorClientOptions = {}): SupervisorClient {
  const client = createPlainSupervisorClient(options);
  const failing = <T>(call: Promise<T>): Promise<T> =>
    call.catch((err: unknown) => {
      throw toActivityFailure(err);
    });
  return {
    status: (target, opts) => failing(client.status(target, opts)),
    gpuMemory: (target, opts) => failing(client.gpuMemory(target, opts)),
    sleep: (target, body, opts) => failing(client.sleep(target, body, opts)),
    wake: (target, body, opts) => failing(client.wake(target, body, opts)),
    startTraining: (target, body, opts) => failing(client.startTraining(target, body, opts)),
    stopTraining: (target, body, opts) => failing(client.stopTraining(target, body, opts)),
    probe: (target, body, opts) => failing(client.probe(target, body, opts)),
    fingerprint: (target, body, opts) => failing(client.fingerprint(target, body, opts)),
    scoreFingerprint: (target, body, opts) => failing(client.scoreFingerprint(target, body, opts)),
  };
}
