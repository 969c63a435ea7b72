import { Router } from 'express';
import type { SupervisorClient } from '../../clients/supervisor-client';
import { monitorLook, monitorStaleAfterMs, polledDomain } from '../../core/monitor-look';
import type { DomainSnapshot } from '../../schemas/entities';
import { errorBodySchema, HaruError } from '../../schemas/errors';
import {
  type DomainStatusResponse,
  domainStatusResponseSchema,
  type FleetHealthResponse,
  fleetHealthResponseSchema,
  type HostReading,
} from '../../schemas/status';
import type { RouteDoc } from '../route-doc';
import { findDomain, loadFleet, param, type RouteContext } from './context';

/** The read-only supervisor calls the status route makes. */
export type HostReader = Pick<SupervisorClient, 'status' | 'gpuMemory'>;

const error = (description: string) => ({ description, schema: errorBodySchema });
const errors = {
  401: error('missing or invalid bearer token (`unauthorized`)'),
  404: error('`fleet_not_found` or `domain_not_found`'),
  503: error('`state_store_unavailable`'),
};

/** The OpenAPI entries of the status routes (api/openapi.ts). */
export const STATUS_ROUTE_DOCS: RouteDoc[] = [
  {
    method: 'get',
    path: '/v1/fleets/:fleet/health',
    summary:
      "Each domain's last poll with its age, and the monitor's assessment with the age of its last look (stale past one checkpoint plus heartbeatStaleMs)",
    tag: 'fleets',
    scope: 'read',
    responses: { 200: { description: 'health', schema: fleetHealthResponseSchema }, ...errors },
  },
  {
    method: 'get',
    path: '/v1/fleets/:fleet/domains/:domain/status',
    summary:
      "One domain: its stored state and last poll, and its supervisor's answer now (models, training runs, GPU memory per GPU)",
    tag: 'fleets',
    scope: 'read',
    responses: {
      200: {
        description: 'status (an unreachable host is `host.isReachable: false`)',
        schema: domainStatusResponseSchema,
      },
      ...errors,
    },
  },
];

/** How long one supervisor read may take before the host counts as unreachable for this answer. */
const HOST_READ_TIMEOUT_MS = 3_000;

/**
 * Reads the host now (at most HOST_READ_TIMEOUT_MS); a failure is part of the answer (`isReachable: false`),
 * never an error of the route. The fleet page reads GPU memory through it too.
 */
export async function readHost(hosts: HostReader, domain: DomainSnapshot, now: Date): Promise<HostReading> {
  const opts = { timeoutMs: HOST_READ_TIMEOUT_MS };
  const [status, memory] = await Promise.allSettled([hosts.status(domain, opts), hosts.gpuMemory(domain, opts)]);
  if (status.status === 'rejected') {
    const why = status.reason instanceof Error ? status.reason.message : String(status.reason);
    return { isReachable: false, error: why, at: null, models: [], training: [], gpus: [] };
  }
  const { models, training, at } = status.value;
  return {
    isReachable: true,
    // GPU memory is a second call: a host that answers status but not memory says why in `error`.
    error: memory.status === 'rejected' ? `GPU memory: ${(memory.reason as Error).message}` : null,
    at,
    models,
    training: training.map((run) => ({
      ...run,
      runningForMs:
        run.state !== 'idle' && run.startedAt ? Math.max(0, now.getTime() - Date.parse(run.startedAt)) : null,
    })),
    gpus: memory.status === 'fulfilled' ? memory.value.gpus : [],
  };
}

/** `GET /v1/fleets/:fleet/health` and `GET /v1/fleets/:fleet/domains/:domain/status`. */
export function statusRoutes(ctx: RouteContext, hosts: HostReader): Router {
  const router = Router();
  router.get('/v1/fleets/:fleet/health', async (req, res) => {
    const fleet = await loadFleet(ctx, param(req, 'fleet'));
    const monitor = await ctx.orchestrator.monitorHealth(fleet.id);
    const now = ctx.now();
    const body: FleetHealthResponse = {
      fleetId: fleet.id,
      fleetSlug: fleet.slug,
      at: now.toISOString(),
      domains: fleet.domains.map((d) => polledDomain(d, fleet.policy.heartbeatStaleMs, now)),
      monitor,
      monitorLook: monitorLook(monitor?.checkedAt ?? null, now, monitorStaleAfterMs(fleet.policy)),
    };
    res.json(body);
  });
  router.get('/v1/fleets/:fleet/domains/:domain/status', async (req, res) => {
    const fleet = await loadFleet(ctx, param(req, 'fleet'));
    const ref = param(req, 'domain');
    const domain = findDomain(fleet, ref);
    if (!domain) throw new HaruError('domain_not_found', `domain ${ref} is not in fleet ${fleet.slug}`);
    const host = await readHost(hosts, domain, ctx.now());
    const now = ctx.now();
    const body: DomainStatusResponse = {
      fleetId: fleet.id,
      fleetSlug: fleet.slug,
      at: now.toISOString(),
      domain: polledDomain(domain, fleet.policy.heartbeatStaleMs, now),
      host,
    };
    res.json(body);
  });
  return router;
}
