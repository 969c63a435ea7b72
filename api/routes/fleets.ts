import { Router } from 'express';
import type { RouteIntent } from '../../schemas/route-intent';
import type { FleetSnapshot } from '../../schemas/entities';
import { routeTargets } from '../../core/route-eligibility';
import { sightedFleet } from '../../core/sighting';
import { activeDomain } from '../proxy/route-table';
import { routingHeaders } from '../proxy/inference';
import { controlStoreTimeoutMs, loadFleet, param, type RouteContext } from './context';
import { storeDeadline } from '../timeout';
import type { ApiKey } from '../auth/api-key';
import { principalOf } from '../auth/principal';

/** The provider-neutral routing answer for a snapshot (schemas/route-intent.ts). */
export function routeIntent(snapshot: FleetSnapshot, now: Date): RouteIntent {
  const active = activeDomain(snapshot);
  const op = snapshot.inFlightOperation;
  const promoting = !!op && op.kind === 'promote';
  const targets = routeTargets(snapshot);
  return {
    fleetId: snapshot.id,
    fleetSlug: snapshot.slug,
    revision: snapshot.routeRevision,
    activeDomain: active
      ? {
          id: active.id,
          slug: active.slug,
          provider: active.provider,
          placement: active.placement,
          servingBaseUrl: active.servingBaseUrl,
        }
      : null,
    models: (targets.active?.models ?? [])
      .filter((m) => m.eligible)
      .map(({ name, servingUrl }) => ({ name, servingUrl })),
    failover: { inFlight: promoting, operationId: promoting ? op.id : null },
    generatedAt: now.toISOString(),
    active: targets.active,
    standbys: targets.standbys,
  };
}

/**
 * `GET /v1/fleets`, `GET /v1/fleets/:fleet`, `GET /v1/fleets/:fleet/route-intent`. The list holds only the
 * fleets the request's key may see (`allows`: a key limited to fleets, api/auth/authorize.ts).
 */
export function fleetRoutes(
  ctx: RouteContext,
  allows: (key: ApiKey | undefined, fleet: FleetSnapshot) => boolean = () => true,
): Router {
  const router = Router();
  router.get('/v1/fleets', async (req, res) => {
    const fleets = await storeDeadline(ctx.store.fleets.list(), controlStoreTimeoutMs(ctx.config));
    const now = ctx.now();
    const key = principalOf(req);
    res.json({ fleets: fleets.filter((f) => allows(key, f)).map((f) => sightedFleet(f, now)) });
  });
  router.get('/v1/fleets/:fleet', async (req, res) => {
    res.json(sightedFleet(await loadFleet(ctx, param(req, 'fleet')), ctx.now()));
  });
  // A fresh read through the routing cache: it must keep answering (stale) while the store is down.
  router.get('/v1/fleets/:fleet/route-intent', async (req, res) => {
    const routing = await ctx.cache.refresh(param(req, 'fleet'));
    res.set(routingHeaders(routing)).json(routeIntent(routing.snapshot, ctx.now()));
  });
  return router;
}
