import { z } from 'zod';
import { placementSchema } from './layout';
import { providerSchema } from './enums';

/**
 * The provider-neutral routing answer: which domain serves and where each model is reached. Any load
 * balancer or gateway can poll it; `revision` increases by exactly one per committed promotion.
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
  models: z.array(z.object({ name: z.string(), servingUrl: z.string() })),
  failover: z.object({ inFlight: z.boolean(), operationId: z.uuid().nullable() }),
  generatedAt: z.string(),
});
export type RouteIntent = z.infer<typeof routeIntentSchema>;
