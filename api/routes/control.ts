import { Router } from 'express';
import { operationTargetProblem } from '../../core/operation-target';
import { demoteRequestSchema, promoteRequestSchema } from '../../schemas/api';
import { reconcileRequestSchema } from '../../schemas/api-responses';
import type { DomainSnapshot, FleetSnapshot } from '../../schemas/entities';
import type { OperationKind } from '../../schemas/enums';
import { HaruError } from '../../schemas/errors';
import { slugsOf } from '../../workflows/start-options';
import { storeDeadline } from '../timeout';
import { requestedBy } from '../auth/principal';
import { controlStoreTimeoutMs, findDomain, loadFleet, param, parseWith, type RouteContext } from './context';
import { reconcile } from './reconcile';

const invalidTarget = (message: string) => new HaruError('invalid_target', message);

/**
 * The domain a promote/demote names, checked by the rule the store and `beginOperation` apply too
 * (core/operation-target.ts, at its `request` moment); 422 `invalid_target` when it fails.
 */
function targetDomain(fleet: FleetSnapshot, kind: OperationKind, ref: string): DomainSnapshot {
  const domain = findDomain(fleet, ref) ?? null;
  const problem = operationTargetProblem({ moment: 'request', kind, fleet, targetRef: ref, target: domain });
  if (problem?.code === 'is_active') throw invalidTarget(`${problem.message}; promote another first`);
  if (problem) throw invalidTarget(problem.message);
  return domain!;
}

/**
 * Inserts the operation row first (the partial unique index decides between created, joined and conflict),
 * then starts its workflow with the id derived from it. Starting an already-started workflow is harmless,
 * which also recovers an operation whose start was lost between insert and start. `by` is the requester as
 * the row, the memo and the events record it (`api:<key name>`).
 */
async function requestOperation(
  ctx: RouteContext,
  fleet: FleetSnapshot,
  kind: OperationKind,
  domain: DomainSnapshot,
  reason: string | undefined,
  by: string,
) {
  const { outcome, operation } = await storeDeadline(
    ctx.store.operations.create({
      fleetId: fleet.id,
      kind,
      targetDomainId: domain.id,
      reason: reason ?? `${kind} requested through the API`,
      requestedBy: by,
    }),
    controlStoreTimeoutMs(ctx.config),
  );
  if (outcome === 'conflict') {
    throw new HaruError(
      'operation_conflict',
      `fleet ${fleet.slug} already has ${operation.kind} operation ${operation.id} in flight (${operation.state})`,
    );
  }
  // The slugs of the fleet, the target and the active it replaces: the workflow's summary in the Web UI.
  await ctx.orchestrator.startOperation(operation, slugsOf(fleet, domain.id));
  ctx.logger.info('operation requested', { fleetId: fleet.id, operationId: operation.id, kind, outcome });
  return { status: outcome === 'created' ? ('accepted' as const) : ('joined' as const), operation };
}

/** `POST /v1/fleets/:fleet/promote`, `/demote` and `/reconcile`. */
export function controlRoutes(ctx: RouteContext): Router {
  const router = Router();

  router.post('/v1/fleets/:fleet/promote', async (req, res) => {
    const body = parseWith(promoteRequestSchema, req.body, 'promote request');
    const fleet = await loadFleet(ctx, param(req, 'fleet'));
    const known = findDomain(fleet, body.targetDomainId);
    if (known && known.id === fleet.activeDomainId) {
      res.status(200).json({ status: 'already_active', routeRevision: fleet.routeRevision, activeDomainId: known.id });
      return;
    }
    const domain = targetDomain(fleet, 'promote', body.targetDomainId);
    res.status(202).json(await requestOperation(ctx, fleet, 'promote', domain, body.reason, requestedBy(req)));
  });

  router.post('/v1/fleets/:fleet/demote', async (req, res) => {
    const body = parseWith(demoteRequestSchema, req.body, 'demote request');
    const fleet = await loadFleet(ctx, param(req, 'fleet'));
    const domain = targetDomain(fleet, 'demote', body.targetDomainId);
    res.status(202).json(await requestOperation(ctx, fleet, 'demote', domain, body.reason, requestedBy(req)));
  });

  router.post('/v1/fleets/:fleet/reconcile', async (req, res) => {
    parseWith(reconcileRequestSchema, req.body ?? {}, 'reconcile request');
    const fleet = await loadFleet(ctx, param(req, 'fleet'));
    res.json(await reconcile(ctx, fleet));
  });

  return router;
}
