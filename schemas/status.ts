import { z } from 'zod';
import { storedDomainHealthSchema } from './api-responses';
import { fleetHealthSchema } from './health';
import { gpuMemorySchema, modelStatusSchema, trainingRunStatusSchema } from './supervisor';

/**
 * How a domain's sighting reads when answered (`sightingOf` in core/sighting.ts): when the watcher last heard
 * it (the worker's receive time of the last answer that counted), how long ago, and whether what its host last
 * said of its slots, models and training may be shown as current (not once it is stale or failed).
 */
export const sightingSchema = z.object({
  lastSeenAt: z.string().nullable(),
  /** Milliseconds since `lastSeenAt`; null when never heard. */
  ageMs: z.number().int().nullable(),
  /** Never heard, or heard longer ago than the fleet's `heartbeatStaleMs`. */
  isStale: z.boolean(),
  /** Not stale and not failed: its slots' and models' stored states are the host's as far as anyone knows. */
  isReportCurrent: z.boolean(),
});
export type Sighting = z.infer<typeof sightingSchema>;

/** A stored poll result with how old it is when answered: `ageMs` null when the domain was never seen. */
export const polledDomainSchema = storedDomainHealthSchema.extend({
  /**
   * Milliseconds from `lastSeenAt` (when the watcher last heard the domain: the worker's receive time of the last
   * answer that counted) to the answer.
   */
  lastSeenAgeMs: z.number().int().nullable(),
  /** Never heard, or heard longer ago than the fleet's `heartbeatStaleMs`: the host is not answering. */
  isStale: z.boolean(),
});
export type PolledDomain = z.infer<typeof polledDomainSchema>;

/** How old the monitor's last look (`health.checkedAt`) is, and whether that is older than it should ever be. */
export const monitorLookSchema = z.object({
  checkedAt: z.string().nullable(),
  ageMs: z.number().int().nullable(),
  /** Older than `staleAfterMs`, or no answer at all: the monitor is not polling (or not reachable). */
  isStale: z.boolean(),
  staleAfterMs: z.number().int(),
});
export type MonitorLook = z.infer<typeof monitorLookSchema>;

/**
 * `GET /v1/fleets/:fleet/health`: each domain's last poll from the store (fresh every heartbeat) and the
 * monitor's own assessment (`health` query, refreshed when it decides or at its checkpoint), with its age.
 */
export const fleetHealthResponseSchema = z.object({
  fleetId: z.uuid(),
  fleetSlug: z.string(),
  at: z.string(),
  domains: z.array(polledDomainSchema),
  /** The monitor's `health` query; null when it did not answer in time or has not polled yet. */
  monitor: fleetHealthSchema.nullable(),
  monitorLook: monitorLookSchema,
});
export type FleetHealthResponse = z.infer<typeof fleetHealthResponseSchema>;

/** A training run with how long it has run (`runningForMs`, null when idle). */
export const trainingProgressSchema = trainingRunStatusSchema.extend({
  runningForMs: z.number().int().nullable(),
});
export type TrainingProgress = z.infer<typeof trainingProgressSchema>;

/**
 * What the domain's supervisor answered just now (`/v1/status`, `/v1/gpu/memory`), or why it did not
 * (`error`; the lists are then empty).
 */
export const hostReadingSchema = z.object({
  isReachable: z.boolean(),
  error: z.string().nullable(),
  /** When the supervisor answered (its own clock); null when it did not. */
  at: z.string().nullable(),
  models: z.array(modelStatusSchema),
  training: z.array(trainingProgressSchema),
  gpus: z.array(gpuMemorySchema),
});
export type HostReading = z.infer<typeof hostReadingSchema>;

/** `GET /v1/fleets/:fleet/domains/:domain/status`: the stored domain with its last poll, and the host now. */
export const domainStatusResponseSchema = z.object({
  fleetId: z.uuid(),
  fleetSlug: z.string(),
  at: z.string(),
  domain: polledDomainSchema,
  host: hostReadingSchema,
});
export type DomainStatusResponse = z.infer<typeof domainStatusResponseSchema>;
