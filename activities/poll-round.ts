import { log } from '@temporalio/activity';
import type { Domain, DomainSnapshot, FleetSnapshot, Slot } from '../schemas/entities';
import type { DomainState } from '../schemas/enums';
import { DOMAIN_TRANSITIONS, predecessorsOf } from '../schemas/transitions';
import type { SupervisorStatus } from '../schemas/supervisor';
import { assessDomain } from '../core/domain-health';
import { missedAnswerProblem, nextDomainState, observeDomain, recoversFailedActive } from '../core/domain-observation';
import { domainRole } from '../core/domain-role';
import { toFleetView } from '../core/fleet-view';
import { isBlindRound, lastSeenRefreshMs, needsPollWrite, type PollSight } from '../core/poll-record';
import { answerWaitMs, judgePoll, pollTimeoutMs } from '../core/poll-verdict';
import { createAnswerBook, type Heard } from './answer-book';
import type { ActivityDeps } from './deps';
import { createServedAnswers } from './served-answers';
import { processEventLoopLag } from '../lib/event-loop-lag';
import { isPortRefused } from '../lib/port-refusal';

/**
 * One supervisor poll of a round as `judgePoll` read it: the status it answered, the error of a poll that
 * counts as failed (no answer, or an answer proving a model frozen or gone), or `servedAnswer` for a poll
 * unanswered while the proxy relays the domain's answers (a success without a status to read).
 */
type Probe = { fleet: FleetSnapshot; domain: DomainSnapshot; at: Date; sight: PollSight } & (
  | { status: SupervisorStatus }
  /**
   * `failures`: how many failed polls it counts as (a confirmed refusal counts as the policy's threshold);
   * `servedAt`: when this worker last heard of an answer the proxy relayed from the domain (a sighting).
   */
  | { error: string; failures: number; servedAt: Date | null }
  | { servedAnswer: true }
);

/** The later of two sightings; null when neither. */
function latest(okAt: string | undefined, servedAt: Date | null): Date | null {
  const ok = okAt === undefined ? null : new Date(okAt);
  if (ok === null || servedAt === null) return ok ?? servedAt;
  return ok > servedAt ? ok : servedAt;
}

/** A supervisor that refused or reset the connection: nothing listens there, the host's kernel says so. */
const REFUSAL = /\b(ECONNREFUSED|ECONNRESET)\b/;
/** How long after a refused poll the refusal is asked again, with every port the domain serves models on. */
const CONFIRM_AFTER_MS = 50;

/** One fleet's polls, judged and not yet recorded (`PollRound.probe`). */
export interface ProbedFleet {
  fleet: FleetSnapshot;
  probes: Probe[];
  /** The first round of this fleet in its watch or look: each of its polls is written. */
  isFirstRound: boolean;
}

/** A fleet after its polls were recorded (`PollRound.record`). */
export interface RecordedFleet {
  /** As its polls left it: what decisions read. */
  polled: FleetSnapshot;
  /** As the store has its domains now: what the next round's `needsPollWrite` compares against. */
  stored: FleetSnapshot;
}

/** A worker's round of supervisor polls, and what it remembers between rounds (docs/architecture.md §4.5). */
export interface PollRound {
  /**
   * Polls every non-stopped domain of `fleet` at once and judges each poll (`judgePoll`); records nothing.
   * `signal` (the activity's cancellation) aborts the requests, and the probe rejects with its reason.
   */
  probe(fleet: FleetSnapshot, signal: AbortSignal, isFirstRound: boolean): Promise<ProbedFleet>;
  /**
   * Records probed fleets: writes the polls that tell the store something new in one statement
   * (`needsPollWrite`: every failure, a success that clears one, a sighting once per `lastSeenRefreshMs`,
   * every poll of a first round), moves the domains whose poll says so and mirrors their slots. Returns each
   * fleet as its polls left it (`polled`: the rows those writes would have left where a write was not
   * needed), and as the store now has its domains (`stored`: a sighting not written keeps its stored time).
   */
  record(probed: readonly ProbedFleet[]): Promise<RecordedFleet[]>;
  /** `probe` then `record`, for fleets polled together (a look). */
  poll(fleets: readonly FleetSnapshot[], signal: AbortSignal, isFirstRound: boolean): Promise<FleetSnapshot[]>;
  /**
   * The fleet as stored, with each domain's sighting as this worker last polled it where the store's is
   * older (a write skipped by `needsPollWrite`), so a decision never sees a live domain's heartbeat lag.
   */
  withSightings(snapshot: FleetSnapshot): FleetSnapshot;
}

/**
 * The poll round shared by every watch shard and every look of this worker. It remembers, per domain, the
 * last successful poll (newer than the store's row between refreshes) and since when a failed active has
 * answered healthy at every poll (this worker's sightings only: a restart counts again from zero, which
 * only delays a recovery).
 */
export function createPollRound(deps: ActivityDeps): PollRound {
  const { store, supervisor } = deps;
  const servedAnswers = deps.servedAnswers ?? createServedAnswers(store, undefined, () => deps.now().getTime());
  const lag = processEventLoopLag();
  const healthySince = new Map<string, number>();
  /** Fleets whose last round saw none of their domains (`isBlindRound`). */
  const blindFleets = new Set<string>();
  const lastOkAt = new Map<string, string>();
  const answers = createAnswerBook();

  /**
   * Asks one domain's supervisor for its status and judges the poll (`judgePoll`); not yet recorded. Null for a
   * poll that timed out while this worker's own event loop stalled (`watcher_lag`): it is not recorded at all.
   * A poll is dated when its answer (or its failure) came, not when it was sent.
   */
  async function probe(fleet: FleetSnapshot, domain: DomainSnapshot, signal: AbortSignal): Promise<Probe | null> {
    const policy = fleet.policy;
    const timeoutMs = pollTimeoutMs(policy);
    const waitMs = answerWaitMs(policy, answers.recentMs(domain.id));
    const sentAt = deps.now();
    const sentAtLoop = performance.now();
    const asked =
      answers.inFlight(domain.id, signal) ?? answers.asking(domain.id, signal, ask(domain, signal, timeoutMs));
    let heard = await answers.within(asked, waitMs, signal);
    if (heard === null) {
      // Silent in its wait: this interval counts against the host unless an earlier poll's late answer came
      // since the last verdict. The request runs on (the next round waits on it rather than asking again, so a
      // slow host is never asked twice at once); if it answers, the next round hears it.
      answers.keepLate(domain.id, asked);
      heard = answers.takeLate(domain.id) ?? {
        outcome: { kind: 'timeout', error: `supervisor: no answer within ${waitMs} ms of the poll` },
        at: deps.now(),
      };
    } else answers.heardNow(domain.id, heard);
    const { outcome, at } = heard;
    const watcherLagMs = outcome.kind === 'timeout' ? lag.maxSince(sentAtLoop) : 0;
    const lastServedAnswerAtMs = servedAnswers.lastServedAnswerAtMs(domain.id);
    // A sighting only for a poll the supervisor left unanswered: one that answered that a model cannot serve
    // (frozen, gone, wedged, erroring) counts whatever the other models of the domain serve meanwhile.
    const servedAt =
      lastServedAnswerAtMs === null || outcome.kind === 'answered' ? null : new Date(lastServedAnswerAtMs);
    const verdict = judgePoll(
      {
        outcome,
        models: domain.slots.flatMap((slot) => (slot.kind === 'inference' ? slot.models.map((m) => m.name) : [])),
        lastServedAnswerAtMs,
        polledAtMs: sentAt.getTime(),
        watcherLagMs,
        waitedMs: waitMs,
      },
      policy,
    );
    if (verdict.evidence === 'watcher_lag') {
      log.warn('supervisor poll not counted: this worker lagged while it waited', {
        fleet: fleet.slug,
        domain: domain.slug,
        watcherLagMs: Math.round(watcherLagMs),
        waitMs,
      });
      return null;
    }
    deps.metrics?.domainPolled({ fleet: fleet.slug, domain: domain.slug, outcome: verdict.isFailed ? 'error' : 'ok' });
    // Seen: it answered, or its host's kernel refused or reset the connection. Silence is not seeing it.
    const refusal = outcome.kind === 'unreachable' && REFUSAL.test(outcome.error) ? outcome.error : null;
    const sight: PollSight = outcome.kind === 'answered' || refusal !== null ? 'seen' : 'unseen';
    // A confirmed refusal outweighs a served answer: answers relayed a moment ago do not keep a host alive whose
    // every port refuses now (a killed active under traffic is decided at once, not one poll timeout later).
    // A domain already failed has nothing left to decide: its refusal is not asked again (a dead host's every
    // poll would otherwise open a connection to each of its ports, twice a second, for as long as it stays dead).
    if (refusal !== null && domain.state !== 'failed' && (verdict.isFailed || verdict.evidence === 'served_answer')) {
      if (await isRefusalConfirmed(domain, signal, timeoutMs)) {
        const confirmed = `${refusal}; confirmed: the supervisor and every model port refuse connections`;
        return {
          fleet,
          domain,
          at: deps.now(),
          sight,
          error: confirmed,
          failures: policy.failureThreshold,
          servedAt,
        };
      }
    }
    if (verdict.isFailed) {
      return { fleet, domain, at, sight, error: verdict.message ?? verdict.evidence, failures: 1, servedAt };
    }
    if (outcome.kind === 'answered') return { fleet, domain, at, sight, status: outcome.status };
    return { fleet, domain, at, sight, servedAnswer: true };
  }

  /** One status request, as the outcome it ends in and when that came; rejects only when `signal` aborts. */
  async function ask(domain: DomainSnapshot, signal: AbortSignal, timeoutMs: number): Promise<Heard> {
    const sentAtLoop = performance.now();
    try {
      const status = await supervisor.status(domain, { signal, timeoutMs });
      answers.tookMs(domain.id, performance.now() - sentAtLoop);
      return { outcome: { kind: 'answered', status }, at: deps.now() };
    } catch (err) {
      if (signal.aborted) throw err;
      const error = err instanceof Error ? err.message : String(err);
      return {
        outcome: { kind: /timed out after \d+ ms$/.test(error) ? 'timeout' : 'unreachable', error },
        at: deps.now(),
      };
    }
  }

  /**
   * Whether a refused poll is the host's death and not a blip or a supervisor restarting: asked again after
   * CONFIRM_AFTER_MS, the supervisor still refuses, and so does every port the domain serves its models on
   * (their servingUrls, as the proxy reaches them). A domain serving no model, or a port that accepts or stays
   * silent (a gateway in front, a frozen host), leaves the refusal one failed poll among the threshold's.
   */
  async function isRefusalConfirmed(domain: DomainSnapshot, signal: AbortSignal, timeoutMs: number): Promise<boolean> {
    const urls = domain.slots.flatMap((slot) =>
      slot.kind === 'inference' ? slot.models.map((m) => m.servingUrl) : [],
    );
    if (urls.length === 0) return false;
    await new Promise((resolve) => setTimeout(resolve, CONFIRM_AFTER_MS));
    if (signal.aborted) throw signal.reason;
    const [supervisorRefuses, ...portsRefuse] = await Promise.all([
      supervisor.status(domain, { signal, timeoutMs }).then(
        () => false,
        (err: unknown) => REFUSAL.test(err instanceof Error ? err.message : String(err)),
      ),
      ...urls.map((url) => isPortRefused(url, timeoutMs, signal)),
    ]);
    if (signal.aborted) throw signal.reason;
    return supervisorRefuses && portsRefuse.every(Boolean);
  }

  /**
   * Acts on one recorded poll (`updated`: the domain's row as the round's write left it): moves the domain's
   * state when the poll says so and records its slots (each slot it moved into `mirrored`); returns the row as
   * this poll left it.
   */
  async function settle(polled: Probe, updated: Domain, mirrored: Map<string, Slot>): Promise<Domain> {
    const { fleet, domain } = polled;
    const policy = fleet.policy;
    const isActive = domain.id === fleet.activeDomainId;
    const op = fleet.inFlightOperation;
    const isInOperation = op !== null && (op.targetDomainId === domain.id || op.fromDomainId === domain.id);
    if (!('status' in polled) || updated.state !== 'failed' || !isActive) healthySince.delete(domain.id);
    if ('servedAnswer' in polled) return updated; // alive, but no status to read slots from
    if (!('status' in polled)) {
      // The active's failure is the workflow's decision; a standby's is bookkeeping done here.
      if (isActive || updated.state === 'failed') return updated;
      const view = toFleetView({ ...fleet, domains: [{ ...updated, slots: domain.slots, isActive }] }).domains[0]!;
      const assessment = assessDomain(view, policy, deps.now());
      if (assessment.status !== 'failed') return updated;
      return (await transition(fleet, domain, 'failed', assessment.reasons.join(', '))) ?? updated;
    }
    const missed = missedAnswerProblem(servedAnswers.missedSinceServed(domain.id), deps.now().getTime());
    const observed = observeDomain(domain, isActive, polled.status, missed);
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
        return (await transition(fleet, domain, 'ready', why)) ?? updated;
      }
    }
    const moved = to ? await transition(fleet, domain, to, observed.problems.join('; ') || null) : null;
    if (isInOperation) return moved ?? updated; // the operation's activities own these slots until it ends
    for (const change of observed.slotChanges) {
      const slot = await store.slots.transition(change.slotId, change.to).catch(() => null);
      if (slot) mirrored.set(slot.id, slot);
    }
    return moved ?? updated;
  }

  /** Moves the domain and records the event; returns the moved row, or null when the move lost a race. */
  async function transition(
    fleet: FleetSnapshot,
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
      fleetId: fleet.id,
      domainId: domain.id,
      type: 'domain.state',
      message: line,
      data: { from: domain.state, to, reason: why },
    });
    return moved;
  }

  /** A successful poll's row as `recordPolls` would have written it (the write it did not need). */
  const asRecorded = (domain: DomainSnapshot, at: Date): Domain => {
    const { slots: _slots, isActive: _isActive, ...row } = domain;
    return { ...row, lastSeenAt: at.toISOString(), consecutiveFailures: 0, lastError: null };
  };

  async function record(probed: readonly ProbedFleet[]): Promise<RecordedFleet[]> {
    const probes = probed.flatMap((p) => p.probes);
    const firstRound = new Set(probed.filter((p) => p.isFirstRound).map((p) => p.fleet.id));
    const written = probes.filter((p) =>
      needsPollWrite(
        p.domain,
        { ok: !('error' in p), atMs: p.at.getTime() },
        lastSeenRefreshMs(p.fleet.policy),
        firstRound.has(p.fleet.id),
      ),
    );
    // The round's writes in one statement; the rare state changes that follow stay per domain.
    const recorded = await store.domains.recordPolls(
      written.map((p) => {
        if (!('error' in p)) return { domainId: p.domain.id, ok: true, at: p.at };
        // When this worker last heard the host, by a success it did not write or an answer the proxy relayed:
        // the row then says so, and the store counts the failed polls since (PollResult.lastSeenAt).
        const seen = latest(lastOkAt.get(p.domain.id), p.servedAt);
        const failed = { domainId: p.domain.id, ok: false, at: p.at, error: p.error, failures: p.failures };
        return seen === null ? failed : { ...failed, lastSeenAt: seen };
      }),
    );
    const rows = new Map(written.map((p, i) => [p.domain.id, recorded[i]!]));
    for (const p of probes) if (!('error' in p)) lastOkAt.set(p.domain.id, p.at.toISOString());
    const polled = new Map<string, Domain>();
    const stored = new Map<string, Domain>();
    const mirrored = new Map<string, Slot>();
    await Promise.all(
      probes.map(async (p) => {
        const written = rows.get(p.domain.id);
        const row = written ?? asRecorded(p.domain, p.at);
        const settled = await settle(p, row, mirrored);
        polled.set(p.domain.id, settled);
        deps.metrics?.hostObserved(
          { fleet: p.fleet.slug, domain: p.domain.slug },
          {
            state: settled.state,
            role: domainRole(settled.state, p.domain.id === p.fleet.activeDomainId),
            lastSeenAt: settled.lastSeenAt,
            staleAfterMs: p.fleet.policy.heartbeatStaleMs,
            status: 'status' in p ? p.status : null,
            answeredAt: 'status' in p ? p.at.toISOString() : null,
          },
        );
        // A moved row and a written one are the store's; a write not needed left its sighting as it was.
        stored.set(p.domain.id, settled !== row || written ? settled : { ...settled, lastSeenAt: p.domain.lastSeenAt });
      }),
    );
    const withRows = (fleet: FleetSnapshot, by: Map<string, Domain>): FleetSnapshot => ({
      ...fleet,
      domains: fleet.domains.map((d) => {
        const row = by.get(d.id);
        return row ? { ...row, slots: d.slots.map((slot) => mirrored.get(slot.id) ?? slot), isActive: d.isActive } : d;
      }),
    });
    return probed.map(({ fleet }) => ({ polled: withRows(fleet, polled), stored: withRows(fleet, stored) }));
  }

  /**
   * Polls every non-stopped domain of `fleet`. A blind round (`isBlindRound`: no domain seen) is held against
   * no host: its polls are not recorded, and the fleet's blindness is told once as it begins and once as it ends
   * (an event, a log line and the `watcherBlind` gauge that HaruWatcherBlind alerts on).
   */
  async function probeFleet(fleet: FleetSnapshot, signal: AbortSignal, isFirstRound: boolean): Promise<ProbedFleet> {
    const probes = (
      await Promise.all(fleet.domains.filter((d) => d.state !== 'stopped').map((d) => probe(fleet, d, signal)))
    ).filter((p): p is Probe => p !== null);
    const isBlind = isBlindRound(probes.map((p) => p.sight));
    if (isBlind !== blindFleets.has(fleet.id)) await sightChanged(fleet, isBlind, probes);
    return { fleet, isFirstRound, probes: isBlind ? [] : probes };
  }

  /** Tells that this worker stopped seeing any domain of `fleet` (or sees one again). */
  async function sightChanged(fleet: FleetSnapshot, isBlind: boolean, probes: readonly Probe[]) {
    if (isBlind) blindFleets.add(fleet.id);
    else blindFleets.delete(fleet.id);
    deps.metrics?.watcherBlind?.({ fleet: fleet.slug }, isBlind);
    const errors = probes.map((p) => ('error' in p ? p.error : null));
    const message = isBlind
      ? `this worker reaches none of fleet ${fleet.slug}'s ${probes.length} domains (every poll timed out or found ` +
        'no route): it cannot tell dead hosts from its own cut-off path, so it holds their failures against none ' +
        'until one is seen again'
      : `this worker sees fleet ${fleet.slug}'s domains again: their polls count`;
    if (isBlind) log.warn('watcher blind to a fleet', { fleet: fleet.slug, errors });
    else log.info('watcher sees a fleet again', { fleet: fleet.slug });
    await store.events
      .append({
        fleetId: fleet.id,
        domainId: null,
        type: isBlind ? 'watcher.blind' : 'watcher.sight',
        message,
        data: isBlind ? { errors } : {},
      })
      .catch((err: unknown) =>
        log.warn('event not written', { error: err instanceof Error ? err.message : String(err) }),
      );
  }

  return {
    probe: probeFleet,
    record,
    async poll(fleets, signal, isFirstRound) {
      const recorded = await record(await Promise.all(fleets.map((f) => probeFleet(f, signal, isFirstRound))));
      return recorded.map((r) => r.polled);
    },

    withSightings: (snapshot) => ({
      ...snapshot,
      domains: snapshot.domains.map((d) => {
        const seen = lastOkAt.get(d.id);
        return seen && (d.lastSeenAt === null || Date.parse(seen) > Date.parse(d.lastSeenAt))
          ? { ...d, lastSeenAt: seen }
          : d;
      }),
    }),
  };
}
