import { z } from 'zod';
import { placementSchema } from './layout';
import { providerSchema } from './enums';

/** A model of a target: where it is reached and whether it may take traffic now. */
export const routeTargetModelSchema = z.object({ name: z.string(), servingUrl: z.string(), eligible: z.boolean() });

/**
 * One domain as a gateway sees it. `eligible`: it may take traffic now (the active, `ready` or `degraded`,
 * with a serving model); `weight`: its share (100 for an eligible active, 0 otherwise, standbys included).
 */
export const routeTargetSchema = z.object({
  domainId: z.uuid(),
  domainSlug: z.string(),
  /** The domain's serving base URL, else its first model's; null for a domain without inference models. */
  endpointUrl: z.string().nullable(),
  eligible: z.boolean(),
  weight: z.number().int().min(0),
  models: z.array(routeTargetModelSchema),
});
export type RouteTarget = z.infer<typeof routeTargetSchema>;

/**
 * The provider-neutral routing answer: which domain serves and where each model is reached. Any load
 * balancer or gateway can poll it; `revision` increases by exactly one per committed promotion. A gateway
 * sends traffic only to `eligible` models of targets with `weight > 0` (docs/architecture.md §5.4).
 */
export const routeIntentSchema = z.object({
  fleetId: z.uuid(),
  fleetSlug: z.string(),
  revision: z.number().int(),
  activeDomain: z
    .object({
      id: z.uuid(),
      slug: z.string(),
      provider: providerSchema,
      placement: placementSchema,
      servingBaseUrl: z.string().nullable(),
    })
    .nullable(),
  /** The active's eligible models (empty when the active may not take traffic). */
  models: z.array(z.object({ name: z.string(), servingUrl: z.string() })),
  failover: z.object({ inFlight: z.boolean(), operationId: z.uuid().nullable() }),
  generatedAt: z.string(),
  active: routeTargetSchema.nullable(),
  standbys: z.array(routeTargetSchema),
});
export type RouteIntent = z.infer<typeof routeIntentSchema>;
