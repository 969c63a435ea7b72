import { ApplicationFailure, CancellationScope, isCancellation, log } from '@temporalio/workflow';
import { FailureType } from '../schemas/failures';
import {
  controlActivities,
  DEFAULT_LAUNCH_TIMEOUT_MS,
  lifecycleActivities,
  provisioningActivities,
} from './activity-options';
import type { ProvisionDomainInput, ProvisionDomainResult } from './definitions';
import { describeFailure } from './failure-info';

/**
 * Brings a skypilot/skyserve domain up (docs/architecture.md §4.6, `haru/<domainId>/provision`): `sky launch` (or
 * `sky serve up`) its rendered YAML, point the domain at the address SkyPilot exposes its supervisor on
 * (unless the layout pins it), wait until its supervisor answers with every model of the layout,
 * put it on standby (models asleep, training started) unless it is the fleet's active, and mark it
 * `ready`. A failure at any step marks the domain `failed` with the step and reason, and fails the
 * workflow. A cancellation (a teardown taking over) leaves the domain's state to whoever cancelled.
 */
export async function provisionDomainWorkflow(input: ProvisionDomainInput): Promise<ProvisionDomainResult> {
  const { domainId } = input;
  const control = controlActivities();
  const target = await control.beginProvisioning({ domainId }).catch((err: unknown) => {
    const info = describeFailure(err);
    throw ApplicationFailure.nonRetryable(`provisioning refused: ${info.message}`, info.code, {
      step: 'begin',
      ...info,
    });
  });
  const launchTimeoutMs = input.launchTimeoutMs ?? DEFAULT_LAUNCH_TIMEOUT_MS;
  const steps = provisioningActivities({ launchTimeoutMs, readyTimeoutMs: input.readyTimeoutMs });
  const { policy } = target;
  const standby = !target.isActive;

  let step = 'launch';
  try {
    const launched = await steps.launchDomain({ domainId, timeoutMs: launchTimeoutMs });
    step = 'resolveSupervisorUrl';
    await steps.resolveSupervisorUrl({ domainId });
    step = 'awaitSupervisor';
    await steps.awaitSupervisor({ domainId });
    if (standby) {
      step = 'sleepModels';
      await lifecycleActivities(policy, policy.sleepTimeoutMs).sleepModels({ fleetId: target.fleetId, domainId });
      if (target.trainingSlotCount > 0) {
        step = 'startTraining';
        await lifecycleActivities(policy, policy.startTrainingTimeoutMs).startTraining({ domainId });
      }
    }
    step = 'finish';
    const finished = await control.finishProvisioning({ domainId, outcome: 'ready' });
    if (finished.state !== 'ready') {
      throw ApplicationFailure.nonRetryable(
        `domain ${target.slug} is ${finished.state}, not provisioning, at the end of its provisioning`,
        FailureType.StateConflict,
      );
    }
    log.info('domain provisioned', { domainId, skyName: launched.skyName, standby });
    return { domainId, state: 'ready', skyName: launched.skyName, standby };
  } catch (err) {
    if (isCancellation(err)) throw err;
    const info = describeFailure(err);
    const reason = `${step}: ${info.message}`;
    await CancellationScope.nonCancellable(() => control.finishProvisioning({ domainId, outcome: 'failed', reason }));
    throw ApplicationFailure.nonRetryable(
      `provisioning of ${target.slug} failed at ${reason}`,
      FailureType.ProvisioningFailed,
      { step, code: info.code, message: info.message },
    );
  }
}
