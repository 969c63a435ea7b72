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
    /** One line in the Web UI's list of workflows: what, on which fleet, from where to where, why. */
    staticSummary: string;
    /** The workflow's page in the Web UI: the ids and the request behind it. */
    staticDetails: string;
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
  /** The active domain when a promotion was asked for: its summary reads `from → to`. */
  from?: string;
}

/**
 * The slugs of `fleet`, of its domain `domainId` and of its active when that is another domain (a fleet
 * snapshot, or the monitor's observation of it).
 */
export const slugsOf = (
  fleet: { slug: string; activeDomainId?: string | null; domains: readonly { id: string; slug: string }[] },
  domainId?: string,
): StartSlugs => {
  const slugOf = (id: string | null | undefined) => fleet.domains.find((d) => d.id === id)?.slug;
  const from = fleet.activeDomainId !== domainId ? slugOf(fleet.activeDomainId) : undefined;
  return { fleet: fleet.slug, domain: slugOf(domainId), ...(from ? { from } : {}) };
};

/** Temporal keeps a summary short; a longer reason is cut, the whole of it stays in the details and the memo. */
const SUMMARY_MAX_CHARS = 200;

/** `<what> <fleet>[/<domain>][: <from> → <to>] (<requestedBy>: <reason>)`, cut to SUMMARY_MAX_CHARS. */
function summaryOf(what: string, subject: string, request?: StartMemo): string {
  const line = request ? `${what} ${subject} (${request.requestedBy}: ${request.reason})` : `${what} ${subject}`;
  return line.length <= SUMMARY_MAX_CHARS ? line : `${line.slice(0, SUMMARY_MAX_CHARS - 1)}…`;
}

/** `name (id)`, or the id alone when the starter does not know the name. */
const named = (slug: string | undefined, id: string) => (slug ? `${slug} (${id})` : id);

/** The details: one `key: value` line per fact, in the order given, skipping what is not known. */
const detailsOf = (facts: [string, string | undefined][]) =>
  facts
    .filter((f): f is [string, string] => f[1] !== undefined)
    .map(([key, value]) => `${key}: ${value}`)
    .join('\n');

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
  const fleet = slugs?.fleet ?? fleetId;
  const target = slugs?.domain ?? targetDomainId;
  const memo = { reason, requestedBy: operation.requestedBy };
  const options = {
    workflowId: operationWorkflowId(fleetId, operationId),
    workflowIdReusePolicy: WorkflowIdReusePolicy.REJECT_DUPLICATE,
    typedSearchAttributes: searchPairs(fleetId, slugs, targetDomainId, operation.kind),
    memo,
    priority: OPERATION_PRIORITY[operation.kind],
    staticSummary:
      operation.kind === 'promote'
        ? summaryOf('promote', `${fleet}: ${slugs?.from ?? 'the active'} → ${target}`, memo)
        : summaryOf('demote', `${fleet}/${target}`, memo),
    staticDetails: detailsOf([
      ['fleet', named(slugs?.fleet, fleetId)],
      ['from', operation.kind === 'promote' ? slugs?.from : undefined],
      [operation.kind === 'promote' ? 'to' : 'domain', named(slugs?.domain, targetDomainId)],
      ['operation', operationId],
      ['requested by', operation.requestedBy],
      ['reason', reason],
    ]),
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
      staticSummary: summaryOf(
        'demote',
        `${promotion.slugs?.fleet ?? fleetId}/${promotion.slugs?.domain ?? oldActiveId}, the old active`,
        { requestedBy: 'promotion', reason: `routing moved away (operation ${operationId})` },
      ),
      staticDetails: detailsOf([
        ['fleet', named(promotion.slugs?.fleet, fleetId)],
        ['domain', named(promotion.slugs?.domain, oldActiveId)],
        ['promotion', operationId],
      ]),
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
      staticSummary: summaryOf('monitor', `fleet ${fleetSlug ?? fleetId}`),
      staticDetails: detailsOf([['fleet', named(fleetSlug, fleetId)]]),
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
      staticSummary: summaryOf('watch', `shard ${shard} of ${shards} (queue ${taskQueue})`),
      staticDetails: detailsOf([
        ['polls', `the fleets dealt to shard ${shard} of ${shards}`],
        ['task queue', taskQueue],
      ]),
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
    options: {
      ...domainStartOptions('provision', provisionWorkflowId(input.domainId), input.domainId, request),
      args: [input],
    },
  };
}

/** Teardown of a skypilot/skyserve domain (`haru/<domainId>/teardown`); like provisioning, once at a time. */
export function teardownStart(input: TeardownDomainInput, request: DomainStartRequest): TeardownStart {
  return {
    workflowType: 'teardownDomainWorkflow',
    options: {
      ...domainStartOptions(
        input.mode === 'stop' ? 'stop' : 'tear down',
        teardownWorkflowId(input.domainId),
        input.domainId,
        request,
      ),
      args: [input],
    },
  };
}

const domainStartOptions = (what: string, workflowId: string, domainId: string, request: DomainStartRequest) => {
  const memo = { reason: request.reason, requestedBy: request.requestedBy };
  return {
    workflowId,
    workflowIdReusePolicy: WorkflowIdReusePolicy.ALLOW_DUPLICATE,
    typedSearchAttributes: searchPairs(request.fleetId, request.slugs, domainId),
    memo,
    staticSummary: summaryOf(
      what,
      `${request.slugs?.fleet ?? request.fleetId}/${request.slugs?.domain ?? domainId}`,
      memo,
    ),
    staticDetails: detailsOf([
      ['fleet', named(request.slugs?.fleet, request.fleetId)],
      ['domain', named(request.slugs?.domain, domainId)],
      ['requested by', request.requestedBy],
      ['reason', request.reason],
    ]),
  };
};

// An absent policy stays absent in the arguments (the workflow then reads the store), never `policy: undefined`.
const withPolicy = (policy: FleetPolicy | undefined): { policy?: FleetPolicy } => (policy ? { policy } : {});
