/**
 * Workflow ids are business keys derived from what a workflow is about, never from time or chance: a second
 * start of the same thing lands on the same id, so Temporal refuses or joins it. Every id is written here
 * once; the state store derives the operation row's `workflowId` with the same function.
 */

/** The fleet's monitor: one per fleet, for as long as the fleet exists. */
export const monitorWorkflowId = (fleetId: string): string => `haru/${fleetId}/monitor`;

/** The one warm-up of worker `workerId` (host:pid:random) as it starts (workflows/warm-up.ts). */
export const workerWarmUpWorkflowId = (workerId: string): string => `haru/worker/${workerId}/warm-up`;

/**
 * The watch of shard `shard` of `shards` (core/watch-shard.ts) of the deployment whose operations queue is
 * `taskQueue` (its workers share one store): named with the count, so a deployment that deals its fleets over
 * another number of shards starts other workflows, and with the queue, so deployments sharing a namespace
 * keep their own.
 */
export const watchShardWorkflowId = (taskQueue: string, shard: number, shards: number): string =>
  `haru/watch/${taskQueue}/${shard}-of-${shards}`;

/**
 * The signal a watch shard sends a fleet's monitor with an observation: its wire name, shared by the workflow
 * that handles it and the worker that sends it from an activity.
 */
export const OBSERVED_SIGNAL = 'observed';

/** A promote or demote operation's workflow, derived from the operation row. */
export const operationWorkflowId = (fleetId: string, operationId: string): string =>
  `haru/${fleetId}/op/${operationId}`;

/** The demotion a promotion starts for the old active: a child of the operation, not an operation itself. */
export const demotionChildWorkflowId = (fleetId: string, operationId: string): string =>
  `${operationWorkflowId(fleetId, operationId)}/demote`;

/** The provisioning of a skypilot/skyserve domain: one at a time per domain. */
export const provisionWorkflowId = (domainId: string): string => `haru/${domainId}/provision`;

/** The teardown of a skypilot/skyserve domain. */
export const teardownWorkflowId = (domainId: string): string => `haru/${domainId}/teardown`;
