import { Router } from 'express';
import { endOrphanedOperation } from '../../db/orphaned-operation';
import { planFleetRepair } from '../../core/fleet-repair';
import { toFleetView } from '../../core/fleet-view';
import {
  type FleetRepairResponse,
  fleetRepairRequestSchema,
  fleetRepairResponseSchema,
} from '../../schemas/api-responses';
import { errorBodySchema } from '../../schemas/errors';
import type { RouteDoc } from '../route-doc';
import { loadFleet, param, parseWith, type RouteContext } from './context';

const error = (description: string) => ({ description, schema: errorBodySchema });

/** The OpenAPI entry of the repair route (api/openapi.ts). */
export const REPAIR_ROUTE_DOCS: RouteDoc[] = [
  {
    method: 'post',
    path: '/v1/fleets/:fleet/repair',
    summary:
      'Re-establish what lets the fleet fail over by itself: end an orphaned operation, start a pending one, have the monitor running and repairing its hosts',
    tag: 'fleets',
    scope: 'operate',
    body: fleetRepairRequestSchema,
    responses: {
      200: { description: 'the steps taken', schema: fleetRepairResponseSchema },
      400: error('`invalid_request`'),
      401: error('missing or invalid bearer token (`unauthorized`)'),
      404: error('`fleet_not_found`'),
      503: error('`orchestrator_unavailable` or `state_store_unavailable`'),
    },
  },
];

/**
 * `POST /v1/fleets/:fleet/repair`: plans the repair from the stored fleet and the in-flight operation's
 * workflow status (core/fleet-repair.ts) and carries it out: an orphaned row is ended as the worker's keeper
 * ends it, a pending operation without a workflow is started, and the monitor is started if none runs and
 * asked to look at once, which makes it repair its hosts.
 */
export function repairRoutes(ctx: RouteContext): Router {
  const router = Router();
  router.post('/v1/fleets/:fleet/repair', async (req, res) => {
    parseWith(fleetRepairRequestSchema, req.body ?? {}, 'repair request');
    const fleet = await loadFleet(ctx, param(req, 'fleet'));
    const op = fleet.inFlightOperation;
    const workflowStatus = op ? await ctx.orchestrator.workflowStatus(op.workflowId) : null;
    const plan = planFleetRepair({ fleet: toFleetView(fleet), operation: op, workflowStatus });
    const steps: FleetRepairResponse['steps'] = [];
    for (const step of plan) {
      let outcome: FleetRepairResponse['steps'][number]['outcome'] = 'done';
      if (step.kind === 'end_orphaned_operation') {
        const ended = await endOrphanedOperation(ctx.store, op!, workflowStatus ?? 'NOT_FOUND');
        if (!ended) outcome = 'skipped';
      } else if (step.kind === 'start_operation') {
        if ((await ctx.orchestrator.startOperation(op!)) === 'already_started') outcome = 'skipped';
      } else if (step.kind === 'repair_host') {
        outcome = 'left_to_monitor';
      } else {
        await ctx.orchestrator.checkNow(fleet.id);
      }
      steps.push({ ...step, outcome });
    }
    ctx.logger.info('fleet repaired', { fleetId: fleet.id, steps: steps.map((s) => `${s.kind}:${s.outcome}`) });
    res.json({ fleetId: fleet.id, steps });
  });
  return router;
}
