import type { Request, Response } from 'express';
import { Router } from 'express';
import { eventsQuerySchema } from '../../schemas/api';
import type { FleetSnapshot } from '../../schemas/entities';
import { startSse, writeSseComment } from '../proxy/sse';
import { storeDeadline } from '../timeout';
import { controlStoreTimeoutMs, loadFleet, param, parseWith, type RouteContext } from './context';

const KEEPALIVE_MS = 15_000;

/**
 * The cursor to start a follow from: the SSE `Last-Event-ID` a reconnecting client sends, else `?after=`.
 * The header wins: a browser's EventSource reconnects to the same URL (its `after` is the first cursor),
 * so only the header says what the client already has.
 */
function startCursor(req: Request, after: number | undefined): number {
  const header = req.header('last-event-id');
  const last = header === undefined || header.trim() === '' ? NaN : Number(header);
  if (Number.isInteger(last) && last >= 0) return last;
  return after ?? 0;
}

/**
 * Streams events as SSE (`id: <cursor>` and `data: <event JSON>` per event) until the client leaves or the
 * API shuts down (`ctx.shutdown`: the stream ends with a comment, so a server draining on SIGTERM is not
 * held open by followers). New events are found by polling the store every HARU_EVENTS_POLL_MS; a store
 * error is logged and retried.
 */
async function follow(
  ctx: RouteContext,
  fleet: FleetSnapshot,
  req: Request,
  res: Response,
  after: number,
  limit: number,
) {
  let cursor = after;
  let closed = false;
  res.on('close', () => {
    closed = true;
  });
  const onShutdown = () => {
    if (closed) return;
    closed = true;
    writeSseComment(res, 'api shutting down');
    res.end();
  };
  ctx.shutdown.addEventListener('abort', onShutdown, { once: true });
  res.once('close', () => ctx.shutdown.removeEventListener('abort', onShutdown));
  if (ctx.shutdown.aborted) return onShutdown();
  startSse(res);
  writeSseComment(res, `following events of fleet ${fleet.slug}`);
  let lastWrite = Date.now();
  while (!closed) {
    try {
      const events = await storeDeadline(
        ctx.store.events.list(fleet.id, { after: cursor, limit }),
        controlStoreTimeoutMs(ctx.config),
      );
      for (const event of events) {
        if (closed) break;
        res.write(`id: ${event.id}\ndata: ${JSON.stringify(event)}\n\n`);
        cursor = event.id;
        lastWrite = Date.now();
      }
      if (events.length === limit) continue; // more are waiting: no pause
    } catch (err) {
      ctx.logger.warn('event follow read failed', {
        fleetId: fleet.id,
        error: err instanceof Error ? err.message : String(err),
      });
    }
    if (Date.now() - lastWrite >= KEEPALIVE_MS) {
      writeSseComment(res, 'keepalive');
      lastWrite = Date.now();
    }
    await new Promise<void>((resolve) => {
      const timer = setTimeout(done, ctx.config.HARU_EVENTS_POLL_MS);
      res.once('close', done);
      ctx.shutdown.addEventListener('abort', done, { once: true });
      function done() {
        clearTimeout(timer);
        res.off('close', done);
        ctx.shutdown.removeEventListener('abort', done);
        resolve();
      }
    });
  }
}

/** `GET /v1/fleets/:fleet/events?after=&limit=`; with `follow=1` the answer is an SSE stream. */
export function eventRoutes(ctx: RouteContext): Router {
  const router = Router();
  router.get('/v1/fleets/:fleet/events', async (req, res) => {
    const query = parseWith(eventsQuerySchema, req.query, 'query');
    const fleet = await loadFleet(ctx, param(req, 'fleet'));
    if (query.follow === '1' || query.follow === 'true') {
      await follow(ctx, fleet, req, res, startCursor(req, query.after), query.limit);
      return;
    }
    const events = await storeDeadline(
      ctx.store.events.list(fleet.id, { after: query.after, limit: query.limit, order: query.order }),
      controlStoreTimeoutMs(ctx.config),
    );
    const newest = query.order === 'desc' ? events[0] : events.at(-1);
    res.json({ events, nextCursor: newest?.id ?? query.after ?? null });
  });
  return router;
}
