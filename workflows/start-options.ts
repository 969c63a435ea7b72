import {
  type Priority,
  type SearchAttributePair,
  WorkflowIdConflictPolicy,
  WorkflowIdReusePolicy,
} from '@temporalio/common';
import {
  demotionChildWorkflowId,
  monitorWorkflowId,
  operationWorkflowId,
  provisionWorkflowId,
  teardownWorkflowId,
  watchShardWorkflowId,
} from '../core/workflow-ids';
import type { OperationKind } from '../schemas/enums';
import type { FleetPolicy } from '../schemas/policy';
import {
  type DemotionInput,
  type FleetMonitorInput,
  type PromotionInput,
  type ProvisionDomainInput,
  searchAttributes,
  type TeardownDomainInput,
  type WatchShardWorkflowInput,
} from './definitions';

/**
 * How each workflow kind is started, whoever starts it: the API and the worker through the client, the
 * monitor and a promotion as children. Pure, with no Node built-ins and nothing that only runs inside a
 * workflow, so both sides import it. The caller adds only where it runs: `taskQueue` on the client, the
 * parent close policy for a child (workflows/start-child.ts).
 *
 * Policy in arguments: a caller that holds the fleet policy passes it; without it the workflow reads the
 * policy from the store when it begins.
 */
export interface WorkflowStart<Type extends string, Input> {
  workflowType: Type;
  options: {
    workflowId: string;
    args: [Input];
    /** What a start does when a run under the same id has closed. */
    workflowIdReusePolicy: WorkflowIdReusePolicy;
    typedSearchAttributes: SearchAttributePair[];
    memo?: StartMemo;
    /** Where its tasks stand in a backlogged task queue (its activities inherit it); unset is Temporal's default, 3. */
    priority?: Priority;
  };
}

/**
 * Task queue priorities of the operations (Temporal's `priorityKey`: 1 is served first, 3 is the default).
 * When a region dies and every fleet fails over at once, the operations queue backs up: the promotions'
 * tasks (whose commit moves routing) are served before the old actives' demotions, which only tidy up, and
 * both before provisioning and teardown (default). Temporal orders only tasks that wait in the queue.
 */
export const OPERATION_PRIORITY = {
  promote: { priorityKey: 1 },
  demote: { priorityKey: 2 },
} as const satisfies Record<OperationKind, Priority>;

/** Why and by whom a workflow was started, shown in the Web UI. */
export type StartMemo = { reason: string; requestedBy: string };

export type PromotionStart = WorkflowStart<'promotionWorkflow', PromotionInput>;
export type DemotionStart = WorkflowStart<'demotionWorkflow', DemotionInput>;
export type ProvisionStart = WorkflowStart<'provisionDomainWorkflow', ProvisionDomainInput>;
export type TeardownStart = WorkflowStart<'teardownDomainWorkflow', TeardownDomainInput>;
/** The monitor is started only through the client, and joins the run already under way. */
export type MonitorStart = WorkflowStart<'fleetMonitorWorkflow', FleetMonitorInput> & {
  options: { workflowIdConflictPolicy: WorkflowIdConflictPolicy };
};

/** A watch shard is started only through the client, and joins the run already under way. */
export type WatchShardStart = WorkflowStart<'watchShardWorkflow', WatchShardWorkflowInput> & {
  options: { workflowIdConflictPolicy: WorkflowIdConflictPolicy };
};

/**
 * The slugs of the fleet and of the domain a workflow acts on, for the `HaruFleetSlug`/`HaruDomainSlug`
 * search attributes. A starter that does not know one leaves it out (the id attributes are always set).
 */
export interface StartSlugs {
  fleet?: string;
  domain?: string;
}

/** The slugs of `fleet` and of its domain `domainId` (a fleet snapshot, or the monitor's observation of it). */
export const slugsOf = (
  fleet: { slug: string; domains: readonly { id: string; slug: string }[] },
  domainId?: string,
): StartSlugs => ({ fleet: fleet.slug, domain: fleet.domains.find((d) => d.id === domainId)?.slug });

/** The search attributes of a workflow acting on `fleetId` (and `domainId`, an operation `kind`). */
function searchPairs(
  fleetId: string,
  slugs: StartSlugs | undefined,
  domainId?: string,
  kind?: OperationKind,
): SearchAttributePair[] {
  const pairs: SearchAttributePair[] = [{ key: searchAttributes.fleet, value: fleetId }];
  if (slugs?.fleet) pairs.push({ key: searchAttributes.fleetSlug, value: slugs.fleet });
  if (domainId) pairs.push({ key: searchAttributes.domain, value: domainId });
  if (domainId && slugs?.domain) pairs.push({ key: searchAttributes.domainSlug, value: slugs.domain });
  if (kind) pairs.push({ key: searchAttributes.operation, value: kind });
  return pairs;
}

/** The part of an operation its start needs: a stored `Operation` or the monitor's `OperationRef`. */
export interface OperationToStart {
  id: string;
  fleetId: string;
  kind: OperationKind;
  targetDomainId: string;
  reason: string;
  requestedBy: string;
}

/**
 * A promote or demote operation's workflow under `haru/<fleetId>/op/<operationId>`. One run per operation:
 * a second start while it runs, or after it closed in any way, is refused (REJECT_DUPLICATE), so a
 * re-posted request or the monitor's restart of a pending operation never runs it twice.
 */
export function operationStart(
  operation: OperationToStart,
  policy?: FleetPolicy,
  slugs?: StartSlugs,
): PromotionStart | DemotionStart {
  const { id: operationId, fleetId, targetDomainId, reason } = operation;
  const options = {
    workflowId: operationWorkflowId(fleetId, operationId),
    workflowIdReusePolicy: WorkflowIdReusePolicy.REJECT_DUPLICATE,
    typedSearchAttributes: searchPairs(fleetId, slugs, targetDomainId, operation.kind),
    memo: { reason, requestedBy: operation.requestedBy },
    priority: OPERATION_PRIORITY[operation.kind],
  };
  if (operation.kind === 'promote') {
    const input: PromotionInput = { fleetId, operationId, targetDomainId, reason, ...withPolicy(policy) };
    return { workflowType: 'promotionWorkflow', options: { ...options, args: [input] } };
  }
  const input: DemotionInput = { fleetId, operationId, domainId: targetDomainId, ...withPolicy(policy) };
  return { workflowType: 'demotionWorkflow', options: { ...options, args: [input] } };
}

/**
 * The demotion of the old active that promotion `operationId` starts once routing moved
 * (`haru/<fleetId>/op/<operationId>/demote`). A closed run does not block a new one: a promotion reset to
 * before its demotion demotes again.
 */
export function demotionChildStart(promotion: {
  fleetId: string;
  operationId: string;
  oldActiveId: string;
  policy?: FleetPolicy;
  slugs?: StartSlugs;
}): DemotionStart {
  const { fleetId, operationId, oldActiveId } = promotion;
  return {
    workflowType: 'demotionWorkflow',
    options: {
      workflowId: demotionChildWorkflowId(fleetId, operationId),
      args: [{ fleetId, domainId: oldActiveId, ...withPolicy(promotion.policy) }],
      workflowIdReusePolicy: WorkflowIdReusePolicy.ALLOW_DUPLICATE,
      typedSearchAttributes: searchPairs(fleetId, promotion.slugs, oldActiveId, 'demote'),
      memo: { reason: `demotion after promotion ${operationId}`, requestedBy: 'promotion' },
      priority: OPERATION_PRIORITY.demote,
    },
  };
}

/**
 * The fleet's monitor (`haru/<fleetId>/monitor`). A start while one runs joins it (USE_EXISTING), so
 * starting it on every worker start, fleet creation or reconcile is harmless; one that ended (its fleet
 * was deleted, an operator terminated it) may be started again.
 */
export function monitorStart(fleetId: string, fleetSlug?: string): MonitorStart {
  return {
    workflowType: 'fleetMonitorWorkflow',
    options: {
      workflowId: monitorWorkflowId(fleetId),
      args: [{ fleetId }],
      workflowIdReusePolicy: WorkflowIdReusePolicy.ALLOW_DUPLICATE,
      workflowIdConflictPolicy: WorkflowIdConflictPolicy.USE_EXISTING,
      typedSearchAttributes: searchPairs(fleetId, { fleet: fleetSlug }),
    },
  };
}

/**
 * The watch of shard `shard` of `shards` of the deployment on `taskQueue` (`haru/watch/<taskQueue>/<shard>-of-<shards>`,
 * core/watch-shard.ts). A start
 * while one runs joins it (USE_EXISTING), so every worker starts every shard at start and in `keepMonitors`;
 * one that ended (retired, terminated) may be started again. `fleetCheckpointMs` is for tests that need a
 * monitor's routine signal sooner than the default minute.
 */
export function watchShardStart(
  taskQueue: string,
  shard: number,
  shards: number,
  opts: { fleetCheckpointMs?: number } = {},
): WatchShardStart {
  return {
    workflowType: 'watchShardWorkflow',
    options: {
      workflowId: watchShardWorkflowId(taskQueue, shard, shards),
      args: [{ shard, shards, ...opts }],
      workflowIdReusePolicy: WorkflowIdReusePolicy.ALLOW_DUPLICATE,
      workflowIdConflictPolicy: WorkflowIdConflictPolicy.USE_EXISTING,
      typedSearchAttributes: [],
    },
  };
}

/** Who asks for a provisioning or teardown, and why. */
export type DomainStartRequest = StartMemo & { fleetId: string; slugs?: StartSlugs };

/**
 * Provisioning of a skypilot/skyserve domain (`haru/<domainId>/provision`). One runs at a time per
 * domain; a domain torn down is provisioned again under the same id (ALLOW_DUPLICATE).
 */
export function provisionStart(input: ProvisionDomainInput, request: DomainStartRequest): ProvisionStart {
  return {
    workflowType: 'provisionDomainWorkflow',
    options: { ...domainStartOptions(provisionWorkflowId(input.domainId), input.domainId, request), args: [input] },
  };
}

/** Teardown of a skypilot/skyserve domain (`haru/<domainId>/teardown`); like provisioning, once at a time. */
export function teardownStart(input: TeardownDomainInput, request: DomainStartRequest): TeardownStart {
  return {
    workflowType: 'teardownDomainWorkflow',
    options: { ...domainStartOptions(teardownWorkflowId(input.domainId), input.domainId, request), args: [input] },
  };
}

const domainStartOptions = (workflowId: string, domainId: string, request: DomainStartRequest) => ({
  workflowId,
  workflowIdReusePolicy: WorkflowIdReusePolicy.ALLOW_DUPLICATE,
  typedSearchAttributes: searchPairs(request.fleetId, request.slugs, domainId),
  memo: { reason: request.reason, requestedBy: request.requestedBy },
});

// An absent policy stays absent in the arguments (the workflow then reads the store), never `policy: undefined`.
const withPolicy = (policy: FleetPolicy | undefined): { policy?: FleetPolicy } => (policy ? { policy } : {});
