import { z } from 'zod';
import { operationSchema, fleetSnapshotSchema, eventSchema, domainSnapshotSchema } from './entities';
import { sightingSchema } from './status';

/** A domain named by UUID or slug. */
export const domainRefSchema = z.string().min(1).max(100);

/** Control bodies are strict: an unknown key is a 400, never silently dropped. */
export const promoteRequestSchema = z.strictObject({
  targetDomainId: domainRefSchema,
  reason: z.string().min(1).max(500).optional(),
});
export type PromoteRequest = z.infer<typeof promoteRequestSchema>;

/** `POST /v1/fleets/:fleet/pause` and `/resume`: why (recorded on the fleet and in the event). */
export const pauseRequestSchema = z.strictObject({
  reason: z.string().min(1).max(500).optional(),
});
export type PauseRequest = z.infer<typeof pauseRequestSchema>;

export const demoteRequestSchema = z.strictObject({
  targetDomainId: domainRefSchema,
  reason: z.string().min(1).max(500).optional(),
});
export type DemoteRequest = z.infer<typeof demoteRequestSchema>;

export const abortRequestSchema = z.strictObject({ reason: z.string().min(1).max(500).optional() });
export type AbortRequest = z.infer<typeof abortRequestSchema>;

export const eventsQuerySchema = z.strictObject({
  after: z.coerce.number().int().min(0).optional(),
  limit: z.coerce.number().int().min(1).max(1_000).default(100),
  /** `asc` (default): oldest first, for paging with `after`; `desc`: the newest `limit`, newest first. */
  order: z.enum(['asc', 'desc']).default('asc'),
  follow: z.enum(['0', '1', 'true', 'false']).optional(),
});

/** Step progress as the promotion workflow reports it (query `progress`) and the API returns it. */
export const stepProgressSchema = z.object({
  step: z.string(),
  status: z.enum(['pending', 'running', 'succeeded', 'failed', 'skipped']),
  startedAt: z.string().nullable(),
  finishedAt: z.string().nullable(),
  attempts: z.number().int(),
  lastError: z.string().nullable(),
});
export type StepProgress = z.infer<typeof stepProgressSchema>;
export const operationProgressSchema = z.object({
  operationId: z.string(),
  kind: z.string(),
  phase: z.enum(['running', 'compensating', 'succeeded', 'failed', 'cancelled']),
  steps: z.array(stepProgressSchema),
  abortRequested: z.boolean(),
});
export type OperationProgress = z.infer<typeof operationProgressSchema>;

export const promoteResponseSchema = z.discriminatedUnion('status', [
  z.object({ status: z.literal('already_active'), routeRevision: z.number().int(), activeDomainId: z.uuid() }),
  z.object({ status: z.enum(['accepted', 'joined']), operation: operationSchema }),
]);
export type PromoteResponse = z.infer<typeof promoteResponseSchema>;

export const operationDetailSchema = operationSchema.extend({ progress: operationProgressSchema.nullable() });
/**
 * `GET /v1/fleets/:fleet` and each fleet of `GET /v1/fleets`: the snapshot, each domain with its sighting as of
 * the answer (`sightedFleet` in core/sighting.ts). A domain whose `sighting.isReportCurrent` is false (stale or
 * failed) has slots whose stored states are only what its host last said: clients show them as unknown.
 */
export const fleetStatusSchema = fleetSnapshotSchema.extend({
  domains: z.array(domainSnapshotSchema.extend({ sighting: sightingSchema })),
});
export type FleetStatus = z.infer<typeof fleetStatusSchema>;
export const fleetListResponseSchema = z.object({ fleets: z.array(fleetStatusSchema) });
export const operationListResponseSchema = z.object({ operations: z.array(operationSchema) });
export const eventListResponseSchema = z.object({
  events: z.array(eventSchema),
  nextCursor: z.number().int().nullable(),
});
