import { and, asc, desc, eq, gt } from 'drizzle-orm';
import type { HaruEvent } from '../../schemas/entities';
import { events } from '../schema';
import { toEvent } from './mappers';
import { isUuid, type RepoDeps } from './support';

export interface AppendEventInput {
  fleetId: string;
  operationId?: string | null;
  domainId?: string | null;
  /** Dotted lowercase type, e.g. `operation.step`, `domain.state`, `routing.committed`. */
  type: string;
  message: string;
  data?: Record<string, unknown>;
}

export type EventRepo = ReturnType<typeof createEventRepo>;

/** The append-only audit log; `id` is the cursor. */
export function createEventRepo({ db, now }: RepoDeps) {
  return {
    /** Appends one event and returns it with its id. */
    async append(input: AppendEventInput): Promise<HaruEvent> {
      const [row] = await db
        .insert(events)
        .values({
          fleetId: input.fleetId,
          operationId: input.operationId ?? null,
          domainId: input.domainId ?? null,
          type: input.type,
          message: input.message,
          data: input.data ?? {},
          createdAt: now(),
        })
        .returning();
      return toEvent(row!);
    },

    /**
     * A fleet's events with `id > after` (default 0), at most `limit` (default 100): ascending, or with
     * `order: 'desc'` the newest of them, newest first.
     */
    async list(
      fleetId: string,
      opts: { after?: number; limit?: number; order?: 'asc' | 'desc' } = {},
    ): Promise<HaruEvent[]> {
      if (!isUuid(fleetId)) return [];
      const rows = await db
        .select()
        .from(events)
        .where(and(eq(events.fleetId, fleetId), gt(events.id, opts.after ?? 0)))
        .orderBy(opts.order === 'desc' ? desc(events.id) : asc(events.id))
        .limit(opts.limit ?? 100);
      return rows.map(toEvent);
    },
  };
}
