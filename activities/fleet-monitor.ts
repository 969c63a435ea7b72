import { Context, log } from '@temporalio/activity';
import { ApplicationFailure } from '@temporalio/common';
import type { AutoFailoverPause, Domain, DomainSnapshot, FleetSnapshot } from '../schemas/entities';
import type { DomainState } from '../schemas/enums';
import { FailureType } from '../schemas/failures';
import { DOMAIN_TRANSITIONS, predecessorsOf } from '../schemas/transitions';
import type { FleetPolicy } from '../schemas/policy';
import type { SupervisorStatus } from '../schemas/supervisor';
import { assessDomain } from '../core/domain-health';
import { nextDomainState, observeDomain, recoversFailedActive } from '../core/domain-observation';
import { toFleetView, type FleetView } from '../core/fleet-view';
import { isDecisionDue } from '../core/monitor-decision';
import { isHeartbeatDue, lastSeenRefreshMs, needsPollWrite } from '../core/poll-record';
import { judgePoll, type PollOutcome, pollTimeoutMs } from '../core/poll-verdict';
import { openWatchWindow, watchedFleet, type WatchContinuity, type WatchWindow } from '../core/watch-window';
import type { ActivityDeps } from './deps';
import { createProofOfLife } from './proof-of-life';

/**
 * The watch activity's input. `watchingSince` and `lookedUntil` are as the previous watch left them: the
 * degraded grace counts from `watchingSince` only if this watch follows on without a gap (`openWatchWindow`).
 */
export interface WatchFleetInput extends WatchContinuity {
  fleetId: string;
  isAutoFailoverPaused: boolean;
  /** Poll once and return at once (after `checkNow` or a pause/resume). */
  isImmediate: boolean;
  /** Return after this long even when nothing is due, so the workflow can refresh its health view. */
  checkpointMs: number;
  /** Pending operations older than this may have lost their workflow and are handed to the workflow. */
  pendingGraceMs: number;
  /** Pending operations the workflow already tried to start. */
  alreadyTriedIds: string[];
  /** Standbys the workflow promoted recently and will not pick again yet. */
  coolingDownIds: string[];
  /** Domains repaired within the retry interval (core/host-repair.ts); absent from runs that make no repairs. */
  repairHeldIds?: string[];
  /** Committed promotions the workflow already asked to end. */
  releasedOperationIds?: string[];
}

/** One observation of a fleet after a round of polls: the input of every monitor decision. */
export interface FleetObservation {
  fleet: FleetView;
  policy: FleetPolicy;
  /** The fleet's stored pause of automatic failover (null: not paused): the pause the monitor obeys. */
  autoFailoverPause?: AutoFailoverPause | null;
  /** When the round that produced `fleet` ended (ISO); decisions use it as `now`. */
  observedAt: string;
  reason: 'decision_due' | 'immediate' | 'checkpoint';
  polls: number;
  /** Since when the monitor has been watching without a gap (ISO): the workflow passes it to the next watch. */
  watchingSince?: string;
}

/**
 * One supervisor poll of a round as `judgePoll` read it: the status it answered, the error of a poll that
 * counts as failed (no answer, or an answer proving a model frozen or gone), or `proofOfLife` for a poll
 * unanswered while the proxy relays the domain's answers (a success without a status to read).
 */
type Probe = { domain: DomainSnapshot; at: Date } & (
  { status: SupervisorStatus } | { error: string } | { proofOfLife: true }
);

/**
 * The fleet monitor's poll loop. Polls every domain's supervisor each `heartbeatIntervalMs`, records
 * what changed (failures, errors, state transitions, and a domain's sighting once per `lastSeenRefreshMs`),
 * and returns only when a decision is due (see `isDecisionDue`), on `isImmediate`, or at the checkpoint,
 * so the workflow's history does not grow per poll. Heartbeats Temporal a few times per heartbeat timeout
 * (`isHeartbeatDue`); cancellation ends it (the workflow cancels it for `checkNow`).
 */
export function createFleetMonitorActivities(deps: ActivityDeps) {
  const { store, supervisor } = deps;
  const proofOfLife = deps.proofOfLife ?? createProofOfLife(store);
  // Since when each failed active has answered healthy at every poll (this worker's sightings only: a
  // restart counts again from zero, which only delays a recovery).
  const healthySince = new Map<string, number>();
  // Each domain's last successful poll by this worker (ISO): newer than the store's row between refreshes.
  const lastOkAt = new Map<string, string>();

  /** Asks one domain's supervisor for its status and judges the poll (`judgePoll`); not yet recorded. */
  async function probe(snapshot: FleetSnapshot, domain: DomainSnapshot, policy: FleetPolicy): Promise<Probe> {
    const timeoutMs = pollTimeoutMs(policy);
    const at = deps.now();
    let outcome: PollOutcome;
    try {
      const status = await supervisor.status(domain, {
        signal: Context.current().cancellationSignal,
        timeoutMs,
      });
      outcome = { kind: 'answered', status };
    } catch (err) {
      if (Context.current().cancellationSignal.aborted) throw err;
      const error = err instanceof Error ? err.message : String(err);
      outcome = { kind: /timed out after \d+ ms$/.test(error) ? 'timeout' : 'unreachable', error };
    }
    const verdict = judgePoll(
      {
        outcome,
        models: domain.slots.flatMap((slot) => (slot.kind === 'inference' ? slot.models.map((m) => m.name) : [])),
        lastServedAtMs: proofOfLife.lastServedAtMs(domain.id),
        polledAtMs: at.getTime(),
      },
      policy,
    );
    const outcomeLabel = verdict.isFailed ? 'error' : 'ok';
    deps.metrics?.domainPolled({ fleet: snapshot.slug, domain: domain.slug, outcome: outcomeLabel });
    if (verdict.isFailed) return { domain, at, error: verdict.message ?? verdict.evidence };
    if (outcome.kind === 'answered') {
      deps.metrics?.hostObserved({ fleet: snapshot.slug, domain: domain.slug }, outcome.status);
      return { domain, at, status: outcome.status };
    }
    return { domain, at, proofOfLife: true };
  }

  /**
   * Acts on one recorded poll (`updated`: the domain's row as the round's heartbeat write left it): moves
   * the domain's state when the poll says so and records its slots; returns the row as this poll left it.
   */
  async function settle(snapshot: FleetSnapshot, polled: Probe, updated: Domain, policy: FleetPolicy): Promise<Domain> {
    const { domain } = polled;
    const isActive = domain.id === snapshot.activeDomainId;
    const op = snapshot.inFlightOperation;
    const isInOperation = op !== null && (op.targetDomainId === domain.id || op.fromDomainId === domain.id);
    if (!('status' in polled) || updated.state !== 'failed' || !isActive) healthySince.delete(domain.id);
    if ('proofOfLife' in polled) return updated; // alive, but no status to read slots from
    if (!('status' in polled)) {
      // The active's failure is the workflow's decision; a standby's is bookkeeping done here.
      if (isActive || updated.state === 'failed') return updated;
      const view = toFleetView({ ...snapshot, domains: [{ ...updated, slots: domain.slots, isActive }] }).domains[0]!;
      const assessment = assessDomain(view, policy, deps.now());
      if (assessment.status !== 'failed') return updated;
      return (await transition(snapshot, domain, 'failed', assessment.reasons.join(', '))) ?? updated;
    }
    const observed = observeDomain(domain, isActive, polled.status);
    const to = nextDomainState(domain.state, isActive, observed.state, domain.provider);
    if (isActive && domain.state === 'failed' && !isInOperation) {
      const since = observed.state === 'ready' ? (healthySince.get(domain.id) ?? polled.at.getTime()) : null;
      if (since === null) healthySince.delete(domain.id);
      else healthySince.set(domain.id, since);
      if (
        since !== null &&
        recoversFailedActive(observed.state, since, polled.at.getTime(), policy.failedActiveRecoveryMs)
      ) {
        healthySince.delete(domain.id);
        const why = `the failed active answered healthy for ${policy.failedActiveRecoveryMs} ms: ready again`;
        return (await transition(snapshot, domain, 'ready', why)) ?? updated;
      }
    }
    const moved = to ? await transition(snapshot, domain, to, observed.problems.join('; ') || null) : null;
    if (isInOperation) return moved ?? updated; // the operation's activities own these slots until it ends
    for (const change of observed.slotChanges) await store.slots.transition(change.slotId, change.to).catch(() => null);
    return moved ?? updated;
  }

  /** Moves the domain and records the event; returns the moved row, or null when the move lost a race. */
  async function transition(
    snapshot: FleetSnapshot,
    domain: DomainSnapshot,
    to: DomainState,
    why: string | null,
  ): Promise<Domain | null> {
    // Only from the state this round saw: a provisioning or teardown that moved the row meanwhile wins.
    if (!predecessorsOf(DOMAIN_TRANSITIONS, to).includes(domain.state)) return null;
    const moved = await store.domains.transition(domain.id, to, { lastError: why, from: [domain.state] });
    if (!moved) return null;
    const line = `domain ${domain.slug}: ${domain.state} -> ${to}${why ? ` (${why})` : ''}`;
    if (to === 'ready') log.info('domain state changed', { domainId: domain.id, from: domain.state, to });
    else log.warn('domain state changed', { domainId: domain.id, from: domain.state, to, why });
    await store.events.append({
      fleetId: snapshot.id,
      domainId: domain.id,
      type: 'domain.state',
      message: line,
      data: { from: domain.state, to, reason: why },
    });
    return moved;
  }

  async function readSnapshot(fleetId: string): Promise<FleetSnapshot> {
    const snapshot = await store.fleets.snapshot(fleetId);
    if (!snapshot) throw ApplicationFailure.nonRetryable(`fleet ${fleetId} does not exist`, FailureType.InvalidTarget);
    return snapshot;
  }

  /**
   * One round: reads the fleet once, polls every domain at the same time, and returns that snapshot with
   * each polled domain's row as its poll left it (heartbeat, failures, state). Reading the fleet a second
   * time after the polls would only add what others wrote meanwhile; the next round's read sees that.
   * Only polls that tell the store something new are written (`needsPollWrite`): a domain that keeps
   * answering is written once per `lastSeenRefreshMs`, and on `isFirstRound`; the others' rows are taken as
   * the write would have left them.
   */
  async function pollOnce(fleetId: string, isFirstRound: boolean): Promise<FleetSnapshot> {
    const before = await readSnapshot(fleetId);
    const probes = await Promise.all(
      before.domains.filter((d) => d.state !== 'stopped').map((d) => probe(before, d, before.policy)),
    );
    const refreshMs = lastSeenRefreshMs(before.policy);
    const written = probes.filter((p) =>
      needsPollWrite(p.domain, { ok: !('error' in p), atMs: p.at.getTime() }, refreshMs, isFirstRound),
    );
    // The round's writes in one statement; the rare state changes that follow stay per domain.
    const recorded = await store.domains.recordPolls(
      written.map((p) =>
        'error' in p
          ? { domainId: p.domain.id, ok: false, at: p.at, error: p.error }
          : { domainId: p.domain.id, ok: true, at: p.at },
      ),
    );
    const rows = new Map(written.map((p, i) => [p.domain.id, recorded[i]!]));
    for (const p of probes) if (!('error' in p)) lastOkAt.set(p.domain.id, p.at.toISOString());
    const polled = new Map<string, Domain>();
    await Promise.all(
      probes.map(async (p) => {
        const row = rows.get(p.domain.id) ?? asRecorded(p.domain, p.at);
        polled.set(p.domain.id, await settle(before, p, row, before.policy));
      }),
    );
    return {
      ...before,
      domains: before.domains.map((d) => {
        const row = polled.get(d.id);
        return row ? { ...row, slots: d.slots, isActive: d.isActive } : d;
      }),
    };
  }

  /** A successful poll's row as `recordPolls` would have written it (the write it did not need). */
  const asRecorded = (domain: DomainSnapshot, at: Date): Domain => {
    const { slots: _slots, isActive: _isActive, ...row } = domain;
    return { ...row, lastSeenAt: at.toISOString(), consecutiveFailures: 0, lastError: null };
  };

  /**
   * The fleet as stored, with each domain's sighting as this worker last polled it where the store's is
   * older (a write skipped by `needsPollWrite`), so a decision never sees a live domain's heartbeat lag.
   */
  const withSightings = (snapshot: FleetSnapshot): FleetSnapshot => ({
    ...snapshot,
    domains: snapshot.domains.map((d) => {
      const seen = lastOkAt.get(d.id);
      return seen && (d.lastSeenAt === null || Date.parse(seen) > Date.parse(d.lastSeenAt))
        ? { ...d, lastSeenAt: seen }
        : d;
    }),
  });

  return {
    /**
     * Writes the monitor's `pauseAutoFailover` / `resumeAutoFailover` signal into the fleet's stored pause
     * (the one the API writes too), so it outlives the monitor run. `changed: false` when it already was so.
     */
    async setAutoFailoverPause(input: {
      fleetId: string;
      paused: boolean;
      by: string;
      reason?: string | null;
    }): Promise<{ changed: boolean }> {
      const set = await store.fleets.setAutoFailoverPause(input.fleetId, input);
      if (!set)
        throw ApplicationFailure.nonRetryable(`fleet ${input.fleetId} does not exist`, FailureType.InvalidTarget);
      return { changed: set.changed };
    },

    /** See {@link createFleetMonitorActivities}. Throws non-retryable InvalidTarget when the fleet is gone. */
    async watchFleet(input: WatchFleetInput): Promise<FleetObservation> {
      const ctx = Context.current();
      const startedAt = deps.now().getTime();
      // Opened after the first poll: the gap it tolerates is the fleet's `heartbeatStaleMs`.
      let watchWindow: WatchWindow | undefined;
      let lastHeartbeatAtMs: number | null = null;
      const watched = (snapshot: FleetSnapshot) => watchedFleet(toFleetView(snapshot), watchWindow!);
      for (let polls = 1; ; polls += 1) {
        const roundStart = deps.now().getTime();
        const snapshot = await pollOnce(input.fleetId, polls === 1);
        watchWindow ??= openWatchWindow(input, ctx.info.attempt, startedAt, snapshot.policy.heartbeatStaleMs);
        let fleet = watched(snapshot);
        let now = deps.now();
        // A pause stored by the API counts at once, whatever the workflow last heard by signal.
        const pausedIn = (s: FleetSnapshot) => ({
          ...input,
          isAutoFailoverPaused: input.isAutoFailoverPaused || !!s.autoFailoverPause,
        });
        let isDue = isDecisionDue(fleet, snapshot.policy, now, pausedIn(snapshot));
        const isCheckpoint = now.getTime() - startedAt >= input.checkpointMs;
        if (isDue || input.isImmediate || isCheckpoint) {
          // The workflow decides on the fleet as stored now, others' writes during this round included.
          const latest = withSightings(await readSnapshot(input.fleetId));
          fleet = watched(latest);
          now = deps.now();
          isDue = isDecisionDue(fleet, latest.policy, now, pausedIn(latest));
          if (isDue || input.isImmediate || isCheckpoint) {
            const reason = isDue ? 'decision_due' : input.isImmediate ? 'immediate' : 'checkpoint';
            const since = new Date(watchWindow.watchingSinceMs).toISOString();
            return {
              fleet,
              policy: latest.policy,
              autoFailoverPause: latest.autoFailoverPause ?? null,
              observedAt: now.toISOString(),
              reason,
              polls,
              watchingSince: since,
            };
          }
        }
        // Temporal hears of the watch a few times per heartbeat timeout, not every round (core/poll-record.ts).
        if (isHeartbeatDue(lastHeartbeatAtMs, now.getTime(), ctx.info.heartbeatTimeoutMs)) {
          ctx.heartbeat({ polls, observedAt: now.toISOString() });
          lastHeartbeatAtMs = now.getTime();
        }
        await ctx.sleep(Math.max(0, snapshot.policy.heartbeatIntervalMs - (now.getTime() - roundStart)));
      }
    },
  };
}
