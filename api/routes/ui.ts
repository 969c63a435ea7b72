import { type Response, Router } from 'express';
import { sightingOf } from '../../core/sighting';
import type { FleetSnapshot } from '../../schemas/entities';
import { errorBodySchema } from '../../schemas/errors';
import type { ApiKey } from '../auth/api-key';
import { principalOf } from '../auth/principal';
import type { HoldQueue } from '../proxy/hold-queue';
import type { RouteDoc } from '../route-doc';
import { storeDeadline } from '../timeout';
import { PAGE_SCRIPT, renderFleetIndex, renderFleetPage } from '../ui/fleet-page';
import { scriptHashSource } from '../ui/live-update';
import { fleetPage, fleetSummary } from '../ui/fleet-page-view';
import { operationsToShow } from '../ui/operation-rows';
import { controlStoreTimeoutMs, loadFleet, param, type RouteContext } from './context';
import { type HostReader, readHost } from './status';

const error = (description: string) => ({ description, schema: errorBodySchema });
const html = (description: string) => ({ description, contentType: 'text/html' });

/** The OpenAPI entries of the fleet page (api/openapi.ts). */
export const UI_ROUTE_DOCS: RouteDoc[] = [
  {
    method: 'get',
    path: '/ui',
    summary:
      "The fleet page's list of the fleets the key may see; with one fleet, or `?fleet=`, a redirect to that fleet's page. Takes the key as a bearer token or as HTTP Basic's password",
    tag: 'meta',
    scope: 'read',
    responses: { 200: html('HTML'), 302: { description: "the fleet's page" }, 401: error('no known key') },
  },
  {
    method: 'get',
    path: '/ui/fleets/:fleet',
    summary:
      "One fleet's page (server-rendered HTML; its one script updates it in place): warnings first, each domain's role, health, last sighting, models, training and GPU memory, the last operations with their steps",
    tag: 'meta',
    scope: 'read',
    responses: { 200: html('HTML'), 401: error('no known key'), 404: error('`fleet_not_found`') },
  },
];

/** The store's newest operations the page reads: enough to find the last failed one (as `haru fleet status`). */
const RECENT_OPERATIONS = 20;

/** What the page needs beside the route context. */
export interface UiDeps {
  /** The proxy's hold queue: how many requests this process holds for a route move. */
  holdQueue: Pick<HoldQueue, 'held' | 'max'>;
  /** Reads a host now (the domain status route's reader): GPU memory. */
  hosts: HostReader;
  /** Whether a key may see a fleet (a key limited to fleets, api/auth/authorize.ts). */
  allows: (key: ApiKey | undefined, fleet: FleetSnapshot) => boolean;
}

// The page holds fleet data: never cached, never framed, no script runs in it but its own (by hash; it fetches
// the page itself, nothing else), no referrer leaves it.
export const PAGE_HEADERS = {
  'cache-control': 'no-store',
  'content-security-policy':
    `default-src 'none'; style-src 'unsafe-inline'; script-src ${scriptHashSource(PAGE_SCRIPT)}; ` +
    "connect-src 'self'; frame-ancestors 'none'; base-uri 'none'",
  'referrer-policy': 'no-referrer',
  'x-content-type-options': 'nosniff',
};
const sendPage = (res: Response, body: string) => res.set(PAGE_HEADERS).type('html').send(body);

const fleetPath = (ref: string) => `/ui/fleets/${encodeURIComponent(ref)}`;

/**
 * `GET /ui` and `GET /ui/fleets/:fleet`: the fleet page, rendered on the server from the sources of the status,
 * health and operations routes (the stored snapshot with its sightings, the monitor's `health` query, each
 * shown operation's `progress` query, the hosts read now), so it works without JavaScript. The hosts whose
 * report is not current (stale or failed) are not read: their memory is unknown, and a dead host costs no wait.
 */
export function uiRoutes(ctx: RouteContext, deps: UiDeps): Router {
  const router = Router();
  router.get('/ui', async (req, res) => {
    const ref = req.query.fleet;
    if (typeof ref === 'string' && ref) return res.redirect(302, fleetPath(ref));
    const key = principalOf(req);
    const fleets = (await storeDeadline(ctx.store.fleets.list(), controlStoreTimeoutMs(ctx.config))).filter((f) =>
      deps.allows(key, f),
    );
    if (fleets.length === 1) return res.redirect(302, fleetPath(fleets[0]!.slug));
    const now = ctx.now();
    sendPage(
      res,
      renderFleetIndex(
        fleets.map((f) => fleetSummary(f, now)),
        now.toISOString(),
      ),
    );
  });

  router.get('/ui/fleets/:fleet', async (req, res) => {
    const fleet = await loadFleet(ctx, param(req, 'fleet'));
    const operations = await storeDeadline(
      ctx.store.operations.list(fleet.id, { limit: RECENT_OPERATIONS }),
      controlStoreTimeoutMs(ctx.config),
    );
    const { shown, lastFailed } = operationsToShow(operations);
    const asked = lastFailed && !shown.includes(lastFailed) ? [...shown, lastFailed] : shown;
    const readAt = ctx.now();
    const current = fleet.domains.filter((d) => sightingOf(d, fleet.policy.heartbeatStaleMs, readAt).isReportCurrent);
    const [monitor, progress, hosts] = await Promise.all([
      ctx.orchestrator.monitorHealth(fleet.id),
      Promise.all(asked.map(async (op) => [op.id, await ctx.orchestrator.progress(op)] as const)),
      Promise.all(current.map(async (d) => [d.id, await readHost(deps.hosts, d, readAt)] as const)),
    ]);
    const page = fleetPage({
      fleet,
      monitor,
      operations,
      progress: new Map(progress),
      hosts: new Map(hosts),
      held: { count: deps.holdQueue.held, max: deps.holdQueue.max },
      temporalUi: ctx.config.HARU_TEMPORAL_UI_URL
        ? { url: ctx.config.HARU_TEMPORAL_UI_URL, namespace: ctx.config.temporal.namespace }
        : null,
      now: ctx.now(),
    });
    sendPage(res, renderFleetPage(page));
  });
  return router;
}
