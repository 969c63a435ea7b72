import {
  ActivityCancellationType,
  ApplicationFailure,
  CancellationScope,
  isCancellation,
  log,
  patched,
  proxyActivities,
  type ActivityOptions,
} from '@temporalio/workflow';
import type { Activities } from '../activities';
import { NON_RETRYABLE_FAILURES } from '../schemas/failures';
import { controlActivities, lifecycleActivities } from './activity-options';
import type { ProvisionDomainInput, ProvisionDomainResult } from './definitions';
import { describeFailure } from './failure-info';

/** Default limit of `sky launch` / `sky serve up`: machines, images, model weights. */
export const DEFAULT_LAUNCH_TIMEOUT_MS = 45 * 60_000;
/** Default time the launched supervisor gets to answer with every model loaded. */
export const DEFAULT_READY_TIMEOUT_MS = 20 * 60_000;

const ms = (n: number): string => `${n}ms`;

/** Patch id of the step that reads the supervisor's address from SkyPilot after the launch. */
export const SUPERVISOR_ENDPOINT_PATCH = 'provision-supervisor-endpoint';

const retry = {
  initialInterval: '1s',
  backoffCoefficient: 2,
  maximumInterval: '30s',
  nonRetryableErrorTypes: [...NON_RETRYABLE_FAILURES],
} satisfies ActivityOptions['retry'];

/**
 * Activity proxies of the provisioning workflows (the `provisioning` latency class): a launch runs for
 * up to its limit and heartbeats every few seconds, so a dead worker is noticed in a minute and the
 * launch retried elsewhere (it reuses the cluster). Shared by provision and teardown.
 */
export function provisioningActivities(opts: { launchTimeoutMs: number; readyTimeoutMs: number }) {
  const long = (budgetMs: number) =>
    proxyActivities<Activities>({
      // The command's own limit ends it first; the margin lets the activity report why.
      startToCloseTimeout: ms(budgetMs + 60_000),
      scheduleToCloseTimeout: ms(3 * (budgetMs + 60_000)),
      heartbeatTimeout: '60s',
      cancellationType: ActivityCancellationType.WAIT_CANCELLATION_COMPLETED,
      retry: { ...retry, maximumAttempts: 3 },
    });
  return {
    launchDomain: long(opts.launchTimeoutMs).launchDomain,
    awaitSupervisor: proxyActivities<Activities>({
      scheduleToCloseTimeout: ms(opts.readyTimeoutMs),
      startToCloseTimeout: ms(opts.readyTimeoutMs),
      heartbeatTimeout: '60s',
      cancellationType: ActivityCancellationType.WAIT_CANCELLATION_COMPLETED,
      retry,
    }).awaitSupervisor,
    // One short `sky status --endpoint`; a failing or unreadable answer (SkyCommandFailed) is asked again.
    resolveSupervisorUrl: proxyActivities<Activities>({
      startToCloseTimeout: '3m',
      scheduleToCloseTimeout: '10m',
      retry,
    }).resolveSupervisorUrl,
    // `sky down` takes minutes; failures are retried (SkyCommandFailed) within this budget.
    destroyDomain: proxyActivities<Activities>({
      startToCloseTimeout: '15m',
      scheduleToCloseTimeout: '1h',
      heartbeatTimeout: '60s',
      retry,
    }).destroyDomain,
  };
}

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
  const steps = provisioningActivities({
    launchTimeoutMs: input.launchTimeoutMs ?? DEFAULT_LAUNCH_TIMEOUT_MS,
    readyTimeoutMs: input.readyTimeoutMs ?? DEFAULT_READY_TIMEOUT_MS,
  });
  const { policy } = target;
  const standby = !target.isActive;

  let step = 'launch';
  try {
    const launched = await steps.launchDomain({
      domainId,
      timeoutMs: input.launchTimeoutMs ?? DEFAULT_LAUNCH_TIMEOUT_MS,
    });
    // Deployed after the first release: provisionings started before it go straight to the wait.
    if (patched(SUPERVISOR_ENDPOINT_PATCH)) {
      step = 'resolveSupervisorUrl';
      await steps.resolveSupervisorUrl({ domainId });
    }
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
        'StateConflict',
      );
    }
    log.info('domain provisioned', { domainId, skyName: launched.skyName, standby });
    return { domainId, state: 'ready', skyName: launched.skyName, standby };
  } catch (err) {
    if (isCancellation(err)) throw err;
    const info = describeFailure(err);
    const reason = `${step}: ${info.message}`;
    await CancellationScope.nonCancellable(() => control.finishProvisioning({ domainId, outcome: 'failed', reason }));
    throw ApplicationFailure.nonRetryable(`provisioning of ${target.slug} failed at ${reason}`, 'ProvisioningFailed', {
      step,
      code: info.code,
      message: info.message,
    });
  }
}
