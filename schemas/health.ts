import { z } from 'zod';
import { domainStateSchema } from './enums';

/** One domain as the fleet monitor last assessed it. */
export const domainHealthSchema = z.object({
  domainId: z.string(),
  slug: z.string(),
  state: domainStateSchema,
  isActive: z.boolean(),
  status: z.enum(['healthy', 'degraded', 'failed', 'unavailable']),
  /** Why the status is not healthy (e.g. `stale`, `consecutive_failures`, `state_degraded`). */
  reasons: z.array(z.string()),
  /**
   * When the watcher last heard the domain: the worker's receive time of the last answer that counted as a
   * sighting; null when never heard.
   */
  lastSeenAt: z.string().nullable(),
  /** Milliseconds from `lastSeenAt` to `checkedAt` (core/sighting.ts `heardAgeMs`); null when never heard. */
  heartbeatAgeMs: z.number().nullable(),
  consecutiveFailures: z.number().int(),
  lastError: z.string().nullable(),
  /** Could take over from the active right now (always false for the active itself). */
  isViableStandby: z.boolean(),
});
export type DomainHealth = z.infer<typeof domainHealthSchema>;

/**
 * The fleet monitor's view (query `health` on `haru/<fleetId>/monitor`): per-domain assessment, the
 * standby ranking, whether the active is considered failed and why a failover is not happening.
 */
export const fleetHealthSchema = z.object({
  fleetId: z.string(),
  fleetSlug: z.string(),
  activeDomainId: z.string().nullable(),
  routeRevision: z.number().int(),
  autoFailover: z.boolean(),
  isAutoFailoverPaused: z.boolean(),
  /** When the supervisors were last polled (ISO). */
  checkedAt: z.string(),
  domains: z.array(domainHealthSchema),
  /** Viable standbys, best first (domain ids). */
  standbyRanking: z.array(z.string()),
  activeFailure: z.object({ reason: z.string(), message: z.string() }).nullable(),
  /** Why a failed active is not being replaced (`paused`, `auto_failover_off`, ...); null otherwise. */
  failoverBlockedBy: z.string().nullable(),
  inFlightOperationId: z.string().nullable(),
});
export type FleetHealth = z.infer<typeof fleetHealthSchema>;
