import express, { type RequestHandler } from 'express';
import type { StatusView } from './status-view';
import type { TrainingManager } from './training';

export interface LegacyRoutesDeps {
  statusView: Pick<StatusView, 'snapshot'>;
  training: Pick<TrainingManager, 'status'>;
}

/**
 * The two read routes of the original project's supervisor, kept as aliases of `GET /v1/status` with the answers
 * they gave (docs/architecture.md §6.2, docs/migration.md), behind the same bearer token:
 * - `GET /v1/ready`: 200 `{ready}`, true when the host has models and every one is awake. 200 whatever `ready`
 *   says, as before: a load balancer checking the status code keeps every host it had in its pool.
 * - `GET /v1/training/status`: 200 `{slots: [{gpuIndex, state, pids}]}`, one entry per training slot.
 * Mounted inside the `/v1` router, after its auth.
 */
export function legacyRoutes(deps: LegacyRoutesDeps): express.Router {
  const router = express.Router();
  const ready: RequestHandler = async (_req, res, next) => {
    try {
      const models = await deps.statusView.snapshot();
      res.json({ ready: models.length > 0 && models.every((m) => m.state === 'awake') });
    } catch (err) {
      next(err);
    }
  };
  router.get('/ready', ready);
  router.get('/training/status', (_req, res) => {
    res.json({ slots: deps.training.status().map(({ gpuIndex, state, pids }) => ({ gpuIndex, state, pids })) });
  });
  return router;
}
