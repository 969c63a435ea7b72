import { Router } from 'express';
import { HaruError } from '../../schemas/errors';
import type { RouteContext } from './context';

const errorMessage = (err: unknown) => (err instanceof Error ? err.message : String(err));

/** `GET /healthz` (touches nothing) and `GET /readyz` (Postgres and Temporal both answer). */
export function healthRoutes(ctx: RouteContext): Router {
  const router = Router();
  router.get('/healthz', (_req, res) => {
    res.json({ status: 'ok' });
  });
  router.get('/readyz', async (_req, res) => {
    const timeoutMs = ctx.config.HARU_TEMPORAL_TIMEOUT_MS;
    const bounded = (p: Promise<void>) =>
      Promise.race([
        p,
        new Promise<never>((_, reject) =>
          setTimeout(() => reject(new Error(`no answer in ${timeoutMs} ms`)), timeoutMs).unref(),
        ),
      ]);
    // The orchestrator bounds its own calls with a gRPC deadline; the database ping gets a timer here.
    const [postgres, temporal] = await Promise.allSettled([bounded(ctx.database.ping()), ctx.orchestrator.ping()]);
    if (postgres.status === 'rejected') {
      const also = temporal.status === 'rejected' ? '; Temporal is unreachable too' : '';
      throw new HaruError(
        'state_store_unavailable',
        `Postgres is unreachable: ${errorMessage(postgres.reason)}${also}`,
      );
    }
    if (temporal.status === 'rejected') {
      if (temporal.reason instanceof HaruError) throw temporal.reason;
      throw new HaruError('orchestrator_unavailable', `Temporal is unreachable: ${errorMessage(temporal.reason)}`);
    }
    res.json({ status: 'ready', checks: { postgres: 'ok', temporal: 'ok' } });
  });
  return router;
}
