import { z } from 'zod';
import {
  domainStateSchema,
  inferenceSlotStateSchema,
  operationKindSchema,
  operationStateSchema,
  providerSchema,
  sleepLevelSchema,
  trainingSlotStateSchema,
} from './enums';
import { wakeFingerprintsSchema } from './fingerprint';
import { launchSpecSchema, modelBindingSchema, placementSchema, supervisorAccessSchema } from './layout';
import { fleetPolicySchema } from './policy';

/** Rows of the state store as they leave the db layer (timestamps as ISO strings). */

export const isoDateSchema = z.string();

/** Who paused a fleet's automatic failover, why and when (stored on the fleet; survives monitor restarts). */
export const autoFailoverPauseSchema = z.object({
  /** `api`, `cli`, `signal` (the monitor's `pauseAutoFailover`) or an operator's name. */
  by: z.string(),
  reason: z.string().nullable(),
  at: isoDateSchema,
});
export type AutoFailoverPause = z.infer<typeof autoFailoverPauseSchema>;

export const fleetSchema = z.object({
  id: z.uuid(),
  slug: z.string(),
  displayName: z.string(),
  /** The routing pointer: null only for a fleet with no serving domain. */
  activeDomainId: z.uuid().nullable(),
  routeRevision: z.number().int(),
  policy: fleetPolicySchema,
  /** Set while automatic failover is paused (`POST …/pause`); null or absent when it is not. */
  autoFailoverPause: autoFailoverPauseSchema.nullable().optional(),
  createdAt: isoDateSchema,
  updatedAt: isoDateSchema,
});
export type Fleet = z.infer<typeof fleetSchema>;

export const domainSchema = z.object({
  id: z.uuid(),
  fleetId: z.uuid(),
  slug: z.string(),
  displayName: z.string(),
  provider: providerSchema,
  placement: placementSchema,
  supervisorUrl: z.string(),
  /** The layout's supervisor settings; null (or absent in rows written before it existed): the fleet-wide ones. */
  supervisor: supervisorAccessSchema.nullable().optional(),
  servingBaseUrl: z.string().nullable(),
  launch: launchSpecSchema.nullable(),
  state: domainStateSchema,
  stateChangedAt: isoDateSchema,
  /** Last successful supervisor poll; null if never seen. */
  lastSeenAt: isoDateSchema.nullable(),
  consecutiveFailures: z.number().int(),
  lastError: z.string().nullable(),
});
export type Domain = z.infer<typeof domainSchema>;

const slotBase = {
  id: z.uuid(),
  domainId: z.uuid(),
  gpuIndex: z.number().int(),
  stateChangedAt: isoDateSchema,
};
export const inferenceSlotSchema = z.object({
  ...slotBase,
  kind: z.literal('inference'),
  state: inferenceSlotStateSchema,
  sleepLevel: sleepLevelSchema,
  models: z.array(modelBindingSchema),
  /** Fingerprints taken before the last demotion slept this slot's models; absent or empty when none. */
  wakeFingerprints: wakeFingerprintsSchema.optional(),
});
export const trainingSlotSchema = z.object({
  ...slotBase,
  kind: z.literal('training'),
  state: trainingSlotStateSchema,
  command: z.array(z.string()),
  checkpointDir: z.string(),
  env: z.record(z.string(), z.string()),
});
export const slotSchema = z.discriminatedUnion('kind', [inferenceSlotSchema, trainingSlotSchema]);
export type Slot = z.infer<typeof slotSchema>;
export type InferenceSlot = z.infer<typeof inferenceSlotSchema>;
export type TrainingSlot = z.infer<typeof trainingSlotSchema>;

/**
 * Why an operation failed, or which best-effort step a succeeded one went without (a promotion whose old active
 * was left undemoted): the step, a failure type or error code, and a human message.
 */
export const operationErrorSchema = z.object({ step: z.string(), code: z.string(), message: z.string() });
export type OperationError = z.infer<typeof operationErrorSchema>;

export const operationSchema = z.object({
  id: z.uuid(),
  fleetId: z.uuid(),
  kind: operationKindSchema,
  /** promote: the domain to make active; demote: the domain to put on standby. */
  targetDomainId: z.uuid(),
  /** The active domain when the operation was created. */
  fromDomainId: z.uuid().nullable(),
  state: operationStateSchema,
  step: z.string().nullable(),
  reason: z.string(),
  requestedBy: z.string(),
  workflowId: z.string(),
  routingCommitted: z.boolean(),
  /** The route revision written by commitRouting; null until committed. */
  routeRevision: z.number().int().nullable(),
  error: operationErrorSchema.nullable(),
  createdAt: isoDateSchema,
  startedAt: isoDateSchema.nullable(),
  finishedAt: isoDateSchema.nullable(),
});
export type Operation = z.infer<typeof operationSchema>;

export const eventSchema = z.object({
  /** Monotonic cursor (bigserial as a number). */
  id: z.number().int(),
  fleetId: z.uuid(),
  operationId: z.uuid().nullable(),
  domainId: z.uuid().nullable(),
  type: z.string(),
  message: z.string(),
  data: z.record(z.string(), z.unknown()),
  createdAt: isoDateSchema,
});
export type HaruEvent = z.infer<typeof eventSchema>;

export const domainSnapshotSchema = domainSchema.extend({ slots: z.array(slotSchema), isActive: z.boolean() });
export type DomainSnapshot = z.infer<typeof domainSnapshotSchema>;

/** Everything needed to route, decide and display one fleet, read in one go. */
export const fleetSnapshotSchema = fleetSchema.extend({
  domains: z.array(domainSnapshotSchema),
  inFlightOperation: operationSchema.nullable(),
});
export type FleetSnapshot = z.infer<typeof fleetSnapshotSchema>;
