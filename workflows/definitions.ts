import { defineSearchAttributeKey, SearchAttributeType } from '@temporalio/common';
import { defineQuery, defineSignal } from '@temporalio/workflow';
import type { AbortRequest, OperationProgress } from '../schemas/api';
import type { FleetHealth } from '../schemas/health';
import type { FleetPolicy } from '../schemas/policy';
import type { ReplacementState } from '../core/standby-replacement';
import type { FleetObservation } from '../core/fleet-observation';
import type { WatchContinuity } from '../core/watch-window';
import { OBSERVED_SIGNAL } from '../core/workflow-ids';

/**
 * Names and shapes shared by the workflows and whoever starts, signals or queries them (API, worker,
 * `temporal` CLI). Wire names are stored in history: renaming one is a breaking change.
 */

/** Stops a promotion (or demotion) that has not committed; the argument is optional (`temporal workflow signal` sends none). */
export const abortSignal = defineSignal<[AbortRequest?]>('abort');
/** Makes the fleet monitor poll every supervisor now and decide (what `POST /reconcile` sends). */
export const checkNowSignal = defineSignal<[]>('checkNow');
/** Stops automatic promotions until `resumeAutoFailover`; detection and marking go on. */
export const pauseAutoFailoverSignal = defineSignal<[]>('pauseAutoFailover');
export const resumeAutoFailoverSignal = defineSignal<[]>('resumeAutoFailover');
/**
 * Sent by the monitor to a promotion that committed routing and still demotes the old active, when the fleet
 * needs its next failover: the promotion cancels the demotion, waits until it has stopped, and ends.
 */
export const releaseAtCommitSignal = defineSignal<[{ reason: string }]>('releaseAtCommit');
/**
 * An observation of the fleet from its watch shard: something is due, or the checkpoint (§4.5). The monitor
 * decides on the newest one it has not yet seen.
 */
export const observedSignal = defineSignal<[FleetObservation]>(OBSERVED_SIGNAL);
/** An operation's steps with timings, attempts and last error. */
export const progressQuery = defineQuery<OperationProgress>('progress');
/** The monitor's last assessment of the fleet; null before its first round of polls. */
export const healthQuery = defineQuery<FleetHealth | null>('health');

/**
 * Search attributes registered at worker start, so the Web UI can filter by fleet, domain and operation
 * kind: `HaruFleet`/`HaruDomain` hold ids, `HaruFleetSlug`/`HaruDomainSlug` the slugs an operator types
 * (`HaruFleetSlug="dev"`). All Keyword.
 */
export const searchAttributes = {
  fleet: defineSearchAttributeKey('HaruFleet', SearchAttributeType.KEYWORD),
  fleetSlug: defineSearchAttributeKey('HaruFleetSlug', SearchAttributeType.KEYWORD),
  domain: defineSearchAttributeKey('HaruDomain', SearchAttributeType.KEYWORD),
  domainSlug: defineSearchAttributeKey('HaruDomainSlug', SearchAttributeType.KEYWORD),
  operation: defineSearchAttributeKey('HaruOperation', SearchAttributeType.KEYWORD),
} as const;

export {
  demotionChildWorkflowId,
  monitorWorkflowId,
  operationWorkflowId,
  provisionWorkflowId,
  teardownWorkflowId,
  watchShardWorkflowId,
} from '../core/workflow-ids';

export const DEFAULT_TASK_QUEUE = 'haru';

export interface PromotionInput {
  fleetId: string;
  operationId: string;
  targetDomainId: string;
  reason?: string;
  /** The fleet policy for step budgets; read from the store when absent. */
  policy?: FleetPolicy;
}

export interface PromotionResult {
  operationId: string;
  /** `succeeded`, or the state an already finished operation was found in. */
  state: 'succeeded' | 'failed' | 'cancelled';
  routeRevision: number | null;
  /** `unreachable`: the old active's host did not answer; it was left as it was (the monitor marked it failed). */
  demotion: 'succeeded' | 'failed' | 'unreachable' | 'skipped';
}

export interface DemotionInput {
  fleetId: string;
  /** Present for a demotion asked for through the API; absent for the one a promotion starts. */
  operationId?: string;
  domainId: string;
  policy?: FleetPolicy;
}

export interface DemotionResult {
  domainId: string;
  /**
   * `unreachable` (a promotion's child only): the host did not answer, so nothing was demoted; the
   * execution completes, as a best-effort step of a promotion that succeeded, and the promotion records it.
   */
  state: 'succeeded' | 'failed' | 'cancelled' | 'unreachable';
  drained: boolean | null;
  /** With `unreachable`: the step that could not reach the host and its error. */
  unreachable?: { step: string; message: string };
}

export interface FleetMonitorInput {
  fleetId: string;
  /** Carried across continue-as-new. */
  isAutoFailoverPaused?: boolean;
  /** Standbys promoted recently (carried across continue-as-new): `{ domainId, at }` with `at` ISO. */
  recentPromotions?: { domainId: string; at: string }[];
  /** Failed standbys seen and replacements under way (`replaceFailedStandby`), carried across continue-as-new. */
  replacements?: ReplacementState;
  /** Host repairs made recently (carried across continue-as-new): `{ domainId, at }` with `at` ISO. */
  recentRepairs?: { domainId: string; at: string }[];
}

/** The watch of one shard of the fleets (`haru/watch/<taskQueue>/<shard>-of-<shards>`), carried across continue-as-new. */
export interface WatchShardWorkflowInput extends WatchContinuity {
  shard: number;
  shards: number;
  /** How long each watch runs before it hands back (default WATCH_SHARD_CHECKPOINT_MS). */
  checkpointMs?: number;
  /** How often each fleet's monitor hears from the shard when nothing is due (default MONITOR_CHECKPOINT_MS). */
  fleetCheckpointMs?: number;
}

export interface ProvisionDomainInput {
  domainId: string;
  /** Limit of `sky launch` / `sky serve up` (default 45 min). */
  launchTimeoutMs?: number;
  /** How long the launched supervisor may take to answer with every model (default 20 min). */
  readyTimeoutMs?: number;
}

export interface ProvisionDomainResult {
  domainId: string;
  state: 'ready';
  skyName: string;
  /** Whether the domain was put on standby (models asleep, training started). */
  standby: boolean;
}

export interface TeardownDomainInput {
  domainId: string;
  /** `down` terminates the machines (default); `stop` keeps their disks (`sky stop`, skypilot only). */
  mode?: 'down' | 'stop';
  /**
   * Tear down only a domain that is still `failed` (a replacement by the monitor: the standby may have
   * answered again since the decision); otherwise refused with `StateConflict` before anything is touched.
   */
  onlyIfFailed?: boolean;
}

export interface TeardownDomainResult {
  domainId: string;
  state: 'stopped';
  result: 'down' | 'stopped' | 'not_found' | 'already_stopped';
}
