import type { Client, Connection } from '@temporalio/client';
import { WorkflowExecutionAlreadyStartedError } from '@temporalio/common';
import { Router } from 'express';
import type { DomainSnapshot, FleetSnapshot } from '../../schemas/entities';
import { errorBodySchema, HaruError } from '../../schemas/errors';
import {
  provisioningAcceptedResponseSchema,
  provisionRequestSchema,
  teardownAlreadyStoppedResponseSchema,
  teardownRequestSchema,
  type TeardownMode,
} from '../../schemas/provisioning';
import { provisionStart, teardownStart } from '../../workflows/start-options';
import type { RouteDoc } from '../route-doc';
import { requestedBy } from '../auth/principal';
import { isOrchestratorUnreachable } from '../orchestrator';
import { findDomain, loadFleet, param, parseWith, type RouteContext } from './context';

/** What one provision/teardown start asks of Temporal. */
export interface ProvisioningStart {
  kind: 'provision' | 'teardown';
  fleetId: string;
  domainId: string;
  mode?: TeardownMode;
  reason: string;
  requestedBy: string;
}

/**
 * Starts provisioning workflows (`haru/<domainId>/provision`, `haru/<domainId>/teardown`). Starting one
 * that is running already is `already_running`, not an error. Throws HaruError `orchestrator_unavailable`
 * when Temporal does not answer in time.
 */
export interface ProvisioningStarter {
  start(request: ProvisioningStart): Promise<{ workflowId: string; outcome: 'started' | 'already_running' }>;
}

/** The starter over a Temporal client, every call bounded by `timeoutMs`. */
export function createTemporalProvisioningStarter(opts: {
  client: Client;
  connection: Connection;
  taskQueue: string;
  timeoutMs: number;
  now?: () => Date;
}): ProvisioningStarter {
  const now = opts.now ?? (() => new Date());
  return {
    async start(request) {
      const by = { fleetId: request.fleetId, reason: request.reason, requestedBy: request.requestedBy };
      const { workflowType, options } =
        request.kind === 'provision'
          ? provisionStart({ domainId: request.domainId }, by)
          : teardownStart({ domainId: request.domainId, mode: request.mode }, by);
      const { workflowId } = options;
      try {
        await opts.connection.withDeadline(now().getTime() + opts.timeoutMs, () =>
          opts.client.workflow.start(workflowType, { ...options, taskQueue: opts.taskQueue }),
        );
        return { workflowId, outcome: 'started' };
      } catch (err) {
        if (err instanceof WorkflowExecutionAlreadyStartedError) return { workflowId, outcome: 'already_running' };
        if (isOrchestratorUnreachable(err)) {
          throw new HaruError('orchestrator_unavailable', `Temporal is unreachable: ${(err as Error).message}`);
        }
        throw err;
      }
    },
  };
}

const invalidTarget = (message: string) => new HaruError('invalid_target', message);

/** The domain named in the path, provisionable by Haru (not static, with a launch spec for provisioning). */
function managedDomain(fleet: FleetSnapshot, ref: string): DomainSnapshot {
  const domain = findDomain(fleet, ref);
  if (!domain) throw new HaruError('domain_not_found', `domain ${ref} is not in fleet ${fleet.slug}`);
  if (domain.provider === 'static') {
    throw invalidTarget(`domain ${domain.slug} is static: its machines are not provisioned by Haru`);
  }
  return domain;
}

function requireStarter(starter: ProvisioningStarter | undefined): ProvisioningStarter {
  if (!starter) throw new HaruError('orchestrator_unavailable', 'provisioning is not configured on this API');
  return starter;
}

/**
 * `POST /v1/fleets/:fleet/domains/:domain/provision` and `.../teardown`: check the request against the
 * stored domain (the workflow checks again), start the workflow, answer 202 with its id. Without a
 * starter every call is 503 `orchestrator_unavailable`.
 */
export function provisioningRoutes(ctx: RouteContext, starter: ProvisioningStarter | undefined): Router {
  const router = Router();

  router.post('/v1/fleets/:fleet/domains/:domain/provision', async (req, res) => {
    const body = parseWith(provisionRequestSchema, req.body ?? {}, 'provision request');
    const fleet = await loadFleet(ctx, param(req, 'fleet'));
    const domain = managedDomain(fleet, param(req, 'domain'));
    if (!domain.launch) throw invalidTarget(`domain ${domain.slug} has no launch spec (setup/run) in its layout`);
    if (domain.state === 'ready' || domain.state === 'degraded') {
      throw invalidTarget(`domain ${domain.slug} is ${domain.state}: tear it down before provisioning it again`);
    }
    if (domain.state === 'stopping') throw invalidTarget(`domain ${domain.slug} is being torn down`);
    const started = await requireStarter(starter).start({
      kind: 'provision',
      fleetId: fleet.id,
      domainId: domain.id,
      reason: body.reason ?? 'provision requested through the API',
      requestedBy: requestedBy(req),
    });
    ctx.logger.info('provisioning requested', { fleetId: fleet.id, domainId: domain.id, outcome: started.outcome });
    res.status(202).json({
      status: started.outcome === 'started' ? 'accepted' : 'already_running',
      kind: 'provision',
      domainId: domain.id,
      workflowId: started.workflowId,
    });
  });

  router.post('/v1/fleets/:fleet/domains/:domain/teardown', async (req, res) => {
    const body = parseWith(teardownRequestSchema, req.body ?? {}, 'teardown request');
    const fleet = await loadFleet(ctx, param(req, 'fleet'));
    const domain = managedDomain(fleet, param(req, 'domain'));
    if (domain.id === fleet.activeDomainId) {
      throw invalidTarget(`domain ${domain.slug} is the active domain of fleet ${fleet.slug}; promote another first`);
    }
    if (domain.provider === 'skyserve' && body.mode === 'stop') {
      throw invalidTarget(`domain ${domain.slug} is a SkyServe service: it can be taken down, not stopped`);
    }
    if (domain.state === 'stopped') {
      res.status(200).json({ status: 'already_stopped', kind: 'teardown', domainId: domain.id, workflowId: null });
      return;
    }
    const started = await requireStarter(starter).start({
      kind: 'teardown',
      fleetId: fleet.id,
      domainId: domain.id,
      mode: body.mode,
      reason: body.reason ?? 'teardown requested through the API',
      requestedBy: requestedBy(req),
    });
    ctx.logger.info('teardown requested', { fleetId: fleet.id, domainId: domain.id, outcome: started.outcome });
    res.status(202).json({
      status: started.outcome === 'started' ? 'accepted' : 'already_running',
      kind: 'teardown',
      domainId: domain.id,
      workflowId: started.workflowId,
    });
  });

  return router;
}

const error = (description: string) => ({ description, schema: errorBodySchema });
const errors = {
  400: error('`invalid_request`'),
  401: error('missing or invalid bearer token (`unauthorized`)'),
  404: error('`fleet_not_found` or `domain_not_found`'),
  413: error('`payload_too_large`'),
  503: error('`orchestrator_unavailable` or `state_store_unavailable`'),
};

/** OpenAPI entries of these routes (api/openapi.ts lists them with the rest). */
export const PROVISIONING_ROUTE_DOCS: RouteDoc[] = [
  {
    method: 'post',
    path: '/v1/fleets/:fleet/domains/:domain/provision',
    summary: 'Provision a skypilot/skyserve domain (sky launch / sky serve up); returns the workflow id',
    tag: 'fleets',
    scope: 'admin',
    body: provisionRequestSchema,
    responses: {
      202: { description: 'provisioning started or already running', schema: provisioningAcceptedResponseSchema },
      ...errors,
      422: error('static, no launch spec, ready/degraded or being torn down (`invalid_target`)'),
    },
  },
  {
    method: 'post',
    path: '/v1/fleets/:fleet/domains/:domain/teardown',
    summary: 'Tear a skypilot/skyserve domain down (sky down / stop / serve down); never the active',
    tag: 'fleets',
    scope: 'admin',
    body: teardownRequestSchema,
    responses: {
      200: { description: 'already stopped: nothing started', schema: teardownAlreadyStoppedResponseSchema },
      202: { description: 'teardown started or already running', schema: provisioningAcceptedResponseSchema },
      ...errors,
      422: error('the active, static, or `stop` of a SkyServe service (`invalid_target`)'),
    },
  },
];
