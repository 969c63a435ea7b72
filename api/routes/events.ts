import type { Request, Response } from 'express';
import { Router } from 'express';
import { eventsQuerySchema } from '../../schemas/api';
import type { FleetSnapshot } from '../../schemas/entities';
import { HaruError } from '../../schemas/errors';
import { createEventFeeds, type EventFeeds } from '../event-feed';
import { startSse, writeSseComment } from '../proxy/sse';
import { storeDeadline } from '../timeout';
import { controlStoreTimeoutMs, loadFleet, param, parseWith, type RouteContext } from './context';

const KEEPALIVE_MS = 15_000;
/** Most events one read of a fleet's feed returns: a follower far behind catches up a page at a time. */
const FEED_PAGE_SIZE = 500;

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

/** How long a follower refused for the cap is told to wait before it tries again. */
const FOLLOW_RETRY_AFTER_S = 5;

/**
 * Streams events as SSE (`id: <cursor>` and `data: <event JSON>` per event) until the client leaves or the
 * API shuts down (`ctx.shutdown`: the stream ends with a comment, so a server draining on SIGTERM is not
 * held open by followers). The events come from the fleet's one feed (api/event-feed.ts: one store poll every
 * `eventsPollMs` for all its followers); a keepalive comment every 15 s of silence.
 */
function follow(ctx: RouteContext, feeds: EventFeeds, fleet: FleetSnapshot, res: Response, after: number) {
  if (feeds.followerCount() >= ctx.config.HARU_EVENTS_MAX_FOLLOWERS) {
    throw new HaruError(
      'overloaded',
      `this API process has ${ctx.config.HARU_EVENTS_MAX_FOLLOWERS} event followers (HARU_EVENTS_MAX_FOLLOWERS)`,
      { retryAfterSeconds: FOLLOW_RETRY_AFTER_S },
    );
  }
  if (ctx.shutdown.aborted) {
    res.end();
    return;
  }
  startSse(res);
  writeSseComment(res, `following events of fleet ${fleet.slug}`);
  let lastWrite = Date.now();
  const leave = feeds.follow(fleet.id, {
    cursor: after,
    send(event) {
      res.write(`id: ${event.id}\ndata: ${JSON.stringify(event)}\n\n`);
      lastWrite = Date.now();
    },
  });
  const keepalive = setInterval(() => {
    if (Date.now() - lastWrite < KEEPALIVE_MS) return;
    writeSseComment(res, 'keepalive');
    lastWrite = Date.now();
  }, KEEPALIVE_MS / 3);
  const end = () => {
    leave();
    clearInterval(keepalive);
    ctx.shutdown.removeEventListener('abort', onShutdown);
  };
  const onShutdown = () => {
    end();
    writeSseComment(res, 'api shutting down');
    res.end();
  };
  ctx.shutdown.addEventListener('abort', onShutdown, { once: true });
  res.once('close', end);
}

/** `GET /v1/fleets/:fleet/events?after=&limit=`; with `follow=1` the answer is an SSE stream. */
export function eventRoutes(ctx: RouteContext): Router {
  const router = Router();
  const feeds = createEventFeeds({
    list: (fleetId, opts) => storeDeadline(ctx.store.events.list(fleetId, opts), controlStoreTimeoutMs(ctx.config)),
    pollMs: ctx.config.eventsPollMs,
    pageSize: FEED_PAGE_SIZE,
    onReadError: (fleetId, err) =>
      ctx.logger.warn('event follow read failed', {
        fleetId,
        error: err instanceof Error ? err.message : String(err),
      }),
  });
  router.get('/v1/fleets/:fleet/events', async (req, res) => {
    const query = parseWith(eventsQuerySchema, req.query, 'query');
    const fleet = await loadFleet(ctx, param(req, 'fleet'));
    if (query.follow === '1' || query.follow === 'true') {
      follow(ctx, feeds, fleet, res, startCursor(req, query.after));
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
