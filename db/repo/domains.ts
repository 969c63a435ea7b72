import { and, eq, getTableColumns, inArray, sql } from 'drizzle-orm';
import type { Domain } from '../../schemas/entities';
import type { DomainState } from '../../schemas/enums';
import { SERVED_ANSWER_CHANNEL, type ServedAnswerPush } from '../../schemas/served-answer';
import { DOMAIN_TRANSITIONS, InvalidTransitionError, predecessorsOf } from '../../schemas/transitions';
import { domains } from '../schema';
import { toDomain } from './mappers';
import { isUuid, type RepoDeps, timestampParam } from './support';

/** A supervisor poll's outcome, as the fleet monitor records it. */
export interface PollResult {
  ok: boolean;
  at: Date;
  error?: string;
  /**
   * How many failed polls a failed one counts as (default 1): more when the host's refusal was confirmed at once
   * (every port it serves on refused), so the monitor need not wait out the threshold's intervals.
   */
  failures?: number;
  /**
   * A failed poll only: the poller's last sighting of the domain that it did not write (a success within the
   * refresh interval, `needsPollWrite`, or an answer the proxy relayed from it). The stored sighting moves up to
   * it, never back, so the row says when a host that then died was last heard, as the poller knew it, not up to
   * one refresh interval earlier. A sighting newer than the stored one by more than SIGHTING_NEWER_BY_MS starts
   * the count again: the failed polls counted are those since the domain was last heard (docs/architecture.md
   * §9.2).
   */
  lastSeenAt?: Date;
}

/**
 * How much newer a failed poll's sighting must be than the stored one to start the failure count again: more
 * than two workers' receive times of one served answer differ (each dates the proxy's NOTIFY by its own clock:
 * a look on another worker must not restart the count on the answer the shard's worker already counted from),
 * less than the proxy's 250 ms between two announcements of a domain's answers.
 */
export const SIGHTING_NEWER_BY_MS = 100;

export type DomainRepo = ReturnType<typeof createDomainRepo>;

const NEWER_BY = sql.raw(`interval '${SIGHTING_NEWER_BY_MS} milliseconds'`);

/** Failure domains: reads, guarded state transitions and heartbeat bookkeeping. */
export function createDomainRepo({ db, now }: RepoDeps) {
  const notifyAnswer = async (payload: ServedAnswerPush) => {
    await db.execute(sql`select pg_notify(${SERVED_ANSWER_CHANNEL}, ${JSON.stringify(payload)})`);
  };
  return {
    /** The domain with this id, or null. */
    async get(id: string): Promise<Domain | null> {
      if (!isUuid(id)) return null;
      const [row] = await db.select().from(domains).where(eq(domains.id, id));
      return row ? toDomain(row) : null;
    },

    /** Every domain of a fleet, by slug. */
    async listByFleet(fleetId: string): Promise<Domain[]> {
      if (!isUuid(fleetId)) return [];
      const rows = await db.select().from(domains).where(eq(domains.fleetId, fleetId)).orderBy(domains.slug);
      return rows.map(toDomain);
    },

    /**
     * Moves the domain to `to` with one guarded UPDATE (`state IN predecessorsOf(to)`, narrowed to `from`
     * when given: the states this caller expects the domain to be in). Returns the updated domain, or null
     * when it does not exist or its state is not one of the allowed predecessors (a lost race). `lastError`
     * is written when given (null clears it). Throws InvalidTransitionError, before any SQL, when `to` has
     * no predecessor at all or none of `from` has an edge to `to`.
     */
    async transition(
      domainId: string,
      to: DomainState,
      opts: { lastError?: string | null; from?: readonly DomainState[] } = {},
    ): Promise<Domain | null> {
      const all = predecessorsOf(DOMAIN_TRANSITIONS, to);
      const from = opts.from ? all.filter((s) => opts.from!.includes(s)) : all;
      if (from.length === 0) throw new InvalidTransitionError('domain', opts.from?.join('|') ?? '*', to);
      if (!isUuid(domainId)) return null;
      const at = now();
      const [row] = await db
        .update(domains)
        .set({
          state: to,
          stateChangedAt: at,
          updatedAt: at,
          ...(opts.lastError !== undefined ? { lastError: opts.lastError } : {}),
        })
        .where(and(eq(domains.id, domainId), inArray(domains.state, from)))
        .returning();
      return row ? toDomain(row) : null;
    },

    /**
     * Points the domain at the supervisor address its provider reported, with one UPDATE guarded by the
     * domain's state (`whileIn`: the provisioning that learned the address must still own the domain).
     * Returns the updated domain, or null when it does not exist or is in another state.
     */
    async setSupervisorUrl(
      domainId: string,
      supervisorUrl: string,
      opts: { whileIn: readonly DomainState[] },
    ): Promise<Domain | null> {
      if (!isUuid(domainId) || opts.whileIn.length === 0) return null;
      const [row] = await db
        .update(domains)
        .set({ supervisorUrl, updatedAt: now() })
        .where(and(eq(domains.id, domainId), inArray(domains.state, [...opts.whileIn])))
        .returning();
      return row ? toDomain(row) : null;
    },

    /**
     * Records one supervisor poll. ok: `lastSeenAt = at`, failures reset, `lastError` cleared. Not ok:
     * `consecutiveFailures + failures` (default 1) and `lastError = error`. Does not change the state (the monitor decides
     * that with `transition`). Throws when the domain does not exist.
     */
    async recordPoll(domainId: string, poll: PollResult): Promise<Domain> {
      const set = poll.ok
        ? { lastSeenAt: poll.at, consecutiveFailures: 0, lastError: null }
        : {
            consecutiveFailures: poll.lastSeenAt
              ? sql`case when ${domains.lastSeenAt} is null or ${timestampParam(poll.lastSeenAt)} > ${domains.lastSeenAt} + ${NEWER_BY} then ${poll.failures ?? 1}::int else ${domains.consecutiveFailures} + ${poll.failures ?? 1}::int end`
              : sql`${domains.consecutiveFailures} + ${poll.failures ?? 1}::int`,
            lastError: poll.error ?? 'poll failed',
            ...(poll.lastSeenAt
              ? { lastSeenAt: sql`greatest(${domains.lastSeenAt}, ${timestampParam(poll.lastSeenAt)})` }
              : {}),
          };
      const [row] = isUuid(domainId)
        ? await db
            .update(domains)
            .set({ ...set, updatedAt: now() })
            .where(eq(domains.id, domainId))
            .returning()
        : [];
      if (!row) throw new Error(`domain ${domainId} does not exist`);
      return toDomain(row);
    },

    /**
     * Announces on SERVED_ANSWER_CHANNEL that `domainId` answered a user successfully at `at` (a served
     * answer: the monitor's evidence that the domain is alive). Writes no row; a NOTIFY reaches only the
     * listeners connected now.
     */
    async announceServedAnswer(domainId: string, at: Date): Promise<void> {
      await notifyAnswer({ domainId, at: at.toISOString() });
    },

    /**
     * Announces on the same channel that the proxy sent `domainId` a request at `at` and got no answer (`why`:
     * refused, reset before any header, or no headers in time): the monitor's evidence that the clients' path to
     * a domain is broken even where its supervisor answers.
     */
    async announceMissedAnswer(domainId: string, at: Date, why: string): Promise<void> {
      await notifyAnswer({ domainId, at: at.toISOString(), missed: why.slice(0, 500) });
    },

    /**
     * Records a round of supervisor polls, at most one per domain, in one UPDATE: each domain's row is
     * written exactly as `recordPoll` writes it (same columns, no state guard). Returns the updated rows
     * in the order of `polls`. Throws before any SQL when a domain appears twice; throws when a domain does
     * not exist (the others' polls are recorded, as separate `recordPoll` calls would have).
     */
    async recordPolls(polls: readonly (PollResult & { domainId: string })[]): Promise<Domain[]> {
      const ids = polls.map((p) => p.domainId);
      if (new Set(ids).size !== ids.length) throw new Error(`a domain polled twice in one round: ${ids.join(', ')}`);
      const valid = polls.filter((p) => isUuid(p.domainId));
      const rows =
        valid.length === 0
          ? []
          : await db
              .update(domains)
              .set({
                lastSeenAt: sql`case when v.ok then v.at else greatest(${domains.lastSeenAt}, v.seen) end`,
                // A failed poll that carries a sighting newer than the stored one counts from it (PollResult).
                consecutiveFailures: sql`case when v.ok then 0 when v.seen is not null and (${domains.lastSeenAt} is null or v.seen > ${domains.lastSeenAt} + ${NEWER_BY}) then v.failures else ${domains.consecutiveFailures} + v.failures end`,
                lastError: sql`case when v.ok then null else v.error end`,
                updatedAt: now(),
              })
              .from(
                sql`(values ${sql.join(
                  valid.map(
                    (p) =>
                      sql`(${p.domainId}::uuid, ${p.ok}::boolean, ${timestampParam(p.at)}, ${p.ok ? null : (p.error ?? 'poll failed')}::text, ${p.failures ?? 1}::int, ${!p.ok && p.lastSeenAt ? timestampParam(p.lastSeenAt) : sql`null::timestamptz`})`,
                  ),
                  sql`, `,
                )}) as v(id, ok, at, error, failures, seen)`,
              )
              .where(eq(domains.id, sql`v.id`))
              .returning(getTableColumns(domains));
      const byId = new Map(rows.map((r) => [r.id, r]));
      return ids.map((id) => {
        const row = byId.get(id);
        if (!row) throw new Error(`domain ${id} does not exist`);
        return toDomain(row);
      });
    },
  };
}
