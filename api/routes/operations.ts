import { Router } from 'express';
import { abortRequestSchema } from '../../schemas/api';
import { operationsQuerySchema } from '../../schemas/api-responses';
import type { FleetSnapshot, Operation } from '../../schemas/entities';
import { HaruError } from '../../schemas/errors';
import { ABORTED_ERROR_CODE } from '../../schemas/failures';
import { storeDeadline } from '../timeout';
import { controlStoreTimeoutMs, loadFleet, param, parseWith, type RouteContext, UUID_RE } from './context';

async function loadOperation(ctx: RouteContext, fleet: FleetSnapshot, id: string): Promise<Operation> {
  const operation = UUID_RE.test(id)
    ? await storeDeadline(ctx.store.operations.get(id), controlStoreTimeoutMs(ctx.config))
    : null;
  if (!operation || operation.fleetId !== fleet.id) {
    throw new HaruError('operation_not_found', `operation ${id} not found in fleet ${fleet.slug}`);
  }
  return operation;
}

/**
 * Why an operation cannot be aborted, or null when it can: a demotion in flight (the workflow stops at its
 * waiting step; the domain is not the active one, so routing is untouched) or an uncommitted promotion.
 */
function abortRefusal(op: Operation): string | null {
  if (op.state !== 'pending' && op.state !== 'running') return `operation ${op.id} is already ${op.state}`;
  if (op.routingCommitted) return `operation ${op.id} already moved the routing pointer; it can no longer be aborted`;
  return null;
}

/** `GET /v1/fleets/:fleet/operations`, `GET …/operations/:id` (with live progress), `POST …/operations/:id/abort`. */
export function operationRoutes(ctx: RouteContext): Router {
  const router = Router();

  router.get('/v1/fleets/:fleet/operations', async (req, res) => {
    const query = parseWith(operationsQuerySchema, req.query, 'query');
    const fleet = await loadFleet(ctx, param(req, 'fleet'));
    const operations = await storeDeadline(
      ctx.store.operations.list(fleet.id, { limit: query.limit }),
      controlStoreTimeoutMs(ctx.config),
    );
    res.json({ operations });
  });

  router.get('/v1/fleets/:fleet/operations/:operation', async (req, res) => {
    const fleet = await loadFleet(ctx, param(req, 'fleet'));
    const operation = await loadOperation(ctx, fleet, param(req, 'operation'));
    res.json({ ...operation, progress: await ctx.orchestrator.progress(operation) });
  });

  router.post('/v1/fleets/:fleet/operations/:operation/abort', async (req, res) => {
    const body = parseWith(abortRequestSchema, req.body ?? {}, 'abort request');
    const fleet = await loadFleet(ctx, param(req, 'fleet'));
    const operation = await loadOperation(ctx, fleet, param(req, 'operation'));
    const refusal = abortRefusal(operation);
    if (refusal) throw new HaruError('operation_conflict', refusal);
    const reason = body.reason ?? 'aborted through the API';
    const sent = await ctx.orchestrator.abort(operation, reason);
    if (sent === 'signalled') {
      ctx.logger.info('abort requested', { fleetId: fleet.id, operationId: operation.id });
      res.status(202).json(operation);
      return;
    }
    // The workflow never started (the API died between insert and start): close the row directly.
    const cancelled = await storeDeadline(
      ctx.store.operations.cancel(operation.id, {
        step: operation.step ?? 'pending',
        code: ABORTED_ERROR_CODE,
        message: reason,
      }),
      controlStoreTimeoutMs(ctx.config),
    );
    if (!cancelled) {
      const now = await loadOperation(ctx, fleet, operation.id);
      throw new HaruError('operation_conflict', abortRefusal(now) ?? `operation ${operation.id} changed meanwhile`);
    }
    res.status(200).json(cancelled);
  });

  return router;
}
