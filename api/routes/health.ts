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
    // /readyz is open to anyone who reaches the API (a load balancer's probe): it says what is down, and the
    // driver's error text (host names, users, database names) goes to the log only.
    if (postgres.status === 'rejected') {
      ctx.logger.warn('readiness: Postgres is unreachable', { error: errorMessage(postgres.reason) });
      const also = temporal.status === 'rejected' ? '; Temporal is unreachable too' : '';
      throw new HaruError('state_store_unavailable', `Postgres is unreachable${also}`);
    }
    if (temporal.status === 'rejected') {
      ctx.logger.warn('readiness: Temporal is unreachable', { error: errorMessage(temporal.reason) });
      const reason = temporal.reason instanceof HaruError ? temporal.reason : null;
      throw new HaruError(reason?.code ?? 'orchestrator_unavailable', 'Temporal is unreachable', reason?.details);
    }
    res.json({ status: 'ready', checks: { postgres: 'ok', temporal: 'ok' } });
  });
  return router;
}
