import {
  ApplicationFailure,
  CancellationScope,
  getExternalWorkflowHandle,
  isCancellation,
  log,
} from '@temporalio/workflow';
import { FailureType } from '../schemas/failures';
import { controlActivities, lifecycleActivities, provisioningActivities } from './activity-options';
import { provisionWorkflowId, type TeardownDomainInput, type TeardownDomainResult } from './definitions';
import { describeFailure } from './failure-info';

/**
 * Takes a skypilot/skyserve domain down (`haru/<domainId>/teardown`). Refuses the fleet's active domain
 * (and one an in-flight operation uses) before touching anything. Then: the domain goes `stopping`, a
 * running provisioning of it is cancelled, training is stopped (trainers checkpoint within the policy's
 * grace) and the models put to sleep when the supervisor still answers (best effort: a dead host is
 * torn down all the same), then `sky down` (or `sky stop` / `sky serve down`), and the domain is
 * `stopped`. If the machines could not be taken down the domain is marked `failed` with the reason.
 */
export async function teardownDomainWorkflow(input: TeardownDomainInput): Promise<TeardownDomainResult> {
  const { domainId } = input;
  const mode = input.mode ?? 'down';
  const control = controlActivities();
  const target = await control.beginTeardown({ domainId, onlyIfFailed: input.onlyIfFailed }).catch((err: unknown) => {
    const info = describeFailure(err);
    throw ApplicationFailure.nonRetryable(`teardown refused: ${info.message}`, info.code, { step: 'begin', ...info });
  });
  if (target.state === 'stopped') return { domainId, state: 'stopped', result: 'already_stopped' };

  // A launch still running would race `sky down`; the provisioning leaves the domain state to us.
  try {
    await getExternalWorkflowHandle(provisionWorkflowId(domainId)).cancel();
  } catch {
    // None running: nothing to cancel.
  }

  const { policy } = target;
  if (target.wasServing) {
    await bestEffort('stopTraining', () =>
      lifecycleActivities(policy, policy.stopTrainingTimeoutMs).stopTraining({
        domainId,
        graceMs: policy.trainingStopGraceMs,
      }),
    );
    await bestEffort('sleepModels', () =>
      lifecycleActivities(policy, policy.sleepTimeoutMs).sleepModels({ fleetId: target.fleetId, domainId }),
    );
  }

  const steps = provisioningActivities();
  let result: TeardownDomainResult['result'];
  try {
    ({ result } = await steps.destroyDomain({ domainId, mode }));
  } catch (err) {
    const info = describeFailure(err);
    await CancellationScope.nonCancellable(() =>
      control.finishTeardown({ domainId, outcome: 'failed', reason: `destroy: ${info.message}` }),
    );
    throw ApplicationFailure.nonRetryable(
      `teardown of ${target.slug} failed: ${info.message}`,
      FailureType.TeardownFailed,
      {
        step: 'destroy',
        ...info,
      },
    );
  }
  await control.finishTeardown({ domainId, outcome: 'stopped' });
  log.info('domain torn down', { domainId, result, mode });
  return { domainId, state: 'stopped', result };
}

/** Runs a graceful step whose failure must not keep the machines up (a dead host has no supervisor to ask). */
async function bestEffort(step: string, fn: () => Promise<unknown>): Promise<void> {
  try {
    await fn();
  } catch (err) {
    if (isCancellation(err)) throw err;
    log.warn('teardown step skipped', { step, error: describeFailure(err).message });
  }
}
