import { z } from 'zod';
import { domainStateSchema } from './enums';
import { autoFailoverPauseSchema, operationSchema } from './entities';
import { fleetHealthSchema } from './health';

/** API answers that are not entities themselves. Shared by the API, its OpenAPI document and clients. */

export const healthzResponseSchema = z.object({ status: z.literal('ok') });

export const readyzResponseSchema = z.object({
  status: z.literal('ready'),
  checks: z.object({ postgres: z.literal('ok'), temporal: z.literal('ok') }),
});

/** 202 of promote/demote: the operation created (`accepted`) or the identical one in flight (`joined`). */
export const operationAcceptedResponseSchema = z.object({
  status: z.enum(['accepted', 'joined']),
  operation: operationSchema,
});

/** One domain's health as the store has it after a reconcile (the monitor's own view is `FleetHealth`). */
export const storedDomainHealthSchema = z.object({
  id: z.uuid(),
  slug: z.string(),
  state: domainStateSchema,
  isActive: z.boolean(),
  lastSeenAt: z.string().nullable(),
  consecutiveFailures: z.number().int(),
  lastError: z.string().nullable(),
});
export type StoredDomainHealth = z.infer<typeof storedDomainHealthSchema>;

/**
 * `POST /reconcile`: `checkNow` was sent to the monitor; `fresh` says whether every polled domain was seen
 * (or failed a poll) after the signal within the wait; `monitor` is the monitor's `health` query, or null.
 */
export const reconcileResponseSchema = z.object({
  fleetId: z.uuid(),
  signalledAt: z.string(),
  fresh: z.boolean(),
  domains: z.array(storedDomainHealthSchema),
  monitor: fleetHealthSchema.nullable(),
});
export type ReconcileResponse = z.infer<typeof reconcileResponseSchema>;

/** `GET /v1/models`: the OpenAI list format, one entry per model routable on the active domain. */
export const modelListResponseSchema = z.object({
  object: z.literal('list'),
  data: z.array(
    z.object({ id: z.string(), object: z.literal('model'), created: z.number().int(), owned_by: z.string() }),
  ),
});

/** Query of `GET /operations`. */
export const operationsQuerySchema = z.strictObject({
  limit: z.coerce.number().int().min(1).max(1_000).default(50),
});

/** `POST /reconcile` takes no parameters; an empty body or `{}`. */
export const reconcileRequestSchema = z.strictObject({});

/** The answer of `POST …/pause` and `…/resume`: the stored pause after the call, and whether it moved. */
export const pauseResponseSchema = z.object({
  fleetId: z.uuid(),
  /** Null after a resume. */
  autoFailoverPause: autoFailoverPauseSchema.nullable(),
  /** False when the fleet already was paused (or resumed): nothing was recorded. */
  changed: z.boolean(),
});
export type PauseResponse = z.infer<typeof pauseResponseSchema>;

/** `POST …/repair` takes no parameters; an empty body or `{}`. */
export const fleetRepairRequestSchema = z.strictObject({});

/**
 * The answer of `POST /v1/fleets/:fleet/repair`: each step of the plan (core/fleet-repair.ts) with what came
 * of it: `done`, `skipped` (someone else got there first), or `left_to_monitor` (a host repair the monitor's
 * look, just asked for, carries out).
 */
export const fleetRepairResponseSchema = z.object({
  fleetId: z.uuid(),
  steps: z.array(
    z.object({
      kind: z.enum(['end_orphaned_operation', 'start_operation', 'repair_host', 'ensure_monitor']),
      why: z.string(),
      operationId: z.string().optional(),
      domainId: z.string().optional(),
      repair: z.string().optional(),
      outcome: z.enum(['done', 'skipped', 'left_to_monitor']),
    }),
  ),
});
export type FleetRepairResponse = z.infer<typeof fleetRepairResponseSchema>;
