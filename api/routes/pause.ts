import { Router } from 'express';
import { pauseRequestSchema } from '../../schemas/api';
import { type PauseResponse, pauseResponseSchema } from '../../schemas/api-responses';
import { errorBodySchema, HaruError } from '../../schemas/errors';
import type { RouteDoc } from '../route-doc';
import { requestedBy } from '../auth/principal';
import { storeDeadline } from '../timeout';
import { controlStoreTimeoutMs, loadFleet, param, parseWith, type RouteContext } from './context';

const error = (description: string) => ({ description, schema: errorBodySchema });

/** The OpenAPI entries of the pause routes (api/openapi.ts). */
export const PAUSE_ROUTE_DOCS: RouteDoc[] = (['pause', 'resume'] as const).map((verb) => ({
  method: 'post',
  path: `/v1/fleets/:fleet/${verb}`,
  summary:
    verb === 'pause'
      ? 'Pause automatic failover (stored on the fleet: it outlives monitor restarts); detection goes on'
      : 'Resume automatic failover; the monitor decides again at once',
  tag: 'fleets',
  scope: 'operate',
  body: pauseRequestSchema,
  responses: {
    200: { description: `${verb}d, or already so (\`changed: false\`)`, schema: pauseResponseSchema },
    400: error('`invalid_request`'),
    401: error('missing or invalid bearer token (`unauthorized`)'),
    404: error('`fleet_not_found`'),
    503: error('`state_store_unavailable`'),
  },
}));

/**
 * `POST /v1/fleets/:fleet/pause` and `/resume` with `{ reason? }`: writes the fleet's stored pause (a
 * `fleet.paused` / `fleet.resumed` event records who and why), then asks the monitor to look at once
 * (best effort: a monitor that cannot be reached reads the pause on its next round anyway).
 */
export function pauseRoutes(ctx: RouteContext): Router {
  const router = Router();
  for (const verb of ['pause', 'resume'] as const) {
    router.post(`/v1/fleets/:fleet/${verb}`, async (req, res) => {
      const body = parseWith(pauseRequestSchema, req.body ?? {}, `${verb} request`);
      const fleet = await loadFleet(ctx, param(req, 'fleet'));
      const set = await storeDeadline(
        ctx.store.fleets.setAutoFailoverPause(fleet.id, {
          paused: verb === 'pause',
          by: requestedBy(req),
          reason: body.reason,
        }),
        controlStoreTimeoutMs(ctx.config),
      );
      if (!set) throw new HaruError('fleet_not_found', `fleet ${fleet.slug} not found`);
      ctx.logger.info(`automatic failover ${verb} requested`, { fleetId: fleet.id, changed: set.changed });
      await ctx.orchestrator.checkNow(fleet.id, fleet.slug).catch((err: unknown) => {
        ctx.logger.warn('monitor not signalled after a pause change', { fleetId: fleet.id, error: String(err) });
      });
      const answer: PauseResponse = {
        fleetId: fleet.id,
        autoFailoverPause: set.fleet.autoFailoverPause ?? null,
        changed: set.changed,
      };
      res.json(answer);
    });
  }
  return router;
}
