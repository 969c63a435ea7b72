import type { ReplaceFailedStandbyPolicy } from '../schemas/policy';
import { ageMs, type DomainView, type FleetView } from './fleet-view';
import { countedFrom } from './watch-window';

/**
 * The `replaceFailedStandby` policy as the fleet monitor applies it: a standby whose machines Haru
 * manages (skypilot, skyserve) that the monitor has seen failed for the grace is torn down and
 * provisioned again, one replacement at a time per domain, never the active domain.
 */

/** A replacement the monitor started and follows: `teardown` until the domain is stopped, then `provision`. */
export interface ReplacementInFlight {
  domainId: string;
  phase: 'teardown' | 'provision';
  /** ISO time the monitor started the phase's workflow. */
  startedAt: string;
}

/** What the monitor carries between looks (and across continue-as-new). */
export interface ReplacementState {
  /**
   * Failed standbys by id, with the ISO time the monitor first saw each failed in this spell: the
   * domain's own failure time when that lies within the watch that saw it, else the watch's start (a
   * persisted time from before the monitor was looking says nothing about how long it has looked).
   */
  failedSince: Record<string, string>;
  /** Replacements under way, by domain id. */
  inFlight: Record<string, ReplacementInFlight>;
}

export const emptyReplacementState = (): ReplacementState => ({ failedSince: {}, inFlight: {} });

/** What the monitor should start now: a teardown (with why) or the provisioning that follows one. */
export type ReplacementAction =
  | { kind: 'teardown'; domainId: string; slug: string; failedSince: string; reason: string }
  | { kind: 'provision'; domainId: string; slug: string };

const isManaged = (d: DomainView): boolean => d.provider === 'skypilot' || d.provider === 'skyserve';

/** True when the domain's state changed after `iso` (its phase's workflow moved it). */
const changedAfter = (d: DomainView, iso: string): boolean => Date.parse(d.stateChangedAt) > Date.parse(iso);

/**
 * One look's replacement plan. `settings` may be absent (a policy stored before the option existed):
 * off. Pure function of its arguments.
 *
 * - Sightings: every failed managed standby gets `failedSince` (kept while it stays failed), dropped
 *   when it is no longer failed.
 * - In flight: a `teardown` whose domain is `stopped` moves on to `provision`; a `provision` whose domain
 *   is ready or degraded is done. A phase ends without success when the domain became the active, is
 *   gone, or failed after the phase started (a new spell: seen failed from then on). A phase whose domain
 *   has not moved for `graceMs` (its workflow was refused) is started again, which joins a running one.
 * - New: a sighting at least `graceMs` old, not active, not in an operation, not in flight, starts a
 *   teardown. In-flight replacements are finished even when the option was turned off meanwhile.
 */
export function planStandbyReplacements(
  fleet: FleetView,
  settings: ReplaceFailedStandbyPolicy | undefined,
  now: Date,
  watchStartedAt: string,
  state: ReplacementState,
): { state: ReplacementState; actions: ReplacementAction[] } {
  const enabled = settings?.enabled === true;
  const graceMs = settings?.graceMs ?? Number.POSITIVE_INFINITY;
  const at = now.toISOString();
  const byId = new Map(fleet.domains.map((d) => [d.id, d]));
  const isStandby = (d: DomainView) => d.id !== fleet.activeDomainId;
  const op = fleet.inFlightOperation;
  const inOperation = (d: DomainView) => op !== null && op.targetDomainId === d.id;

  const failedSince: Record<string, string> = {};
  for (const d of fleet.domains) {
    if (d.state !== 'failed' || !isStandby(d) || !isManaged(d)) continue;
    failedSince[d.id] = state.failedSince[d.id] ?? countedFrom(d.stateChangedAt, watchStartedAt);
  }

  const actions: ReplacementAction[] = [];
  const inFlight: Record<string, ReplacementInFlight> = {};
  for (const r of Object.values(state.inFlight)) {
    const d = byId.get(r.domainId);
    if (!d || !isStandby(d)) continue;
    if (d.state === 'failed' && changedAfter(d, r.startedAt)) {
      // The phase failed: the domain is seen failed from that moment, and may be replaced again later.
      failedSince[d.id] = d.stateChangedAt;
      continue;
    }
    if (r.phase === 'provision' && (d.state === 'ready' || d.state === 'degraded')) continue;
    // Answered again before its teardown began (the teardown refuses a domain no longer failed): nothing to replace.
    if (r.phase === 'teardown' && (d.state === 'ready' || d.state === 'degraded')) continue;
    if (r.phase === 'teardown' && d.state === 'stopped') {
      inFlight[d.id] = { domainId: d.id, phase: 'provision', startedAt: at };
      actions.push({ kind: 'provision', domainId: d.id, slug: d.slug });
      continue;
    }
    const waiting = r.phase === 'teardown' ? d.state === 'failed' : d.state === 'stopped';
    if (waiting && !changedAfter(d, r.startedAt) && ageMs(r.startedAt, now) >= graceMs) {
      // Its workflow never moved the domain (refused, or lost): start it again.
      inFlight[d.id] = { ...r, startedAt: at };
      actions.push(
        r.phase === 'provision'
          ? { kind: 'provision', domainId: d.id, slug: d.slug }
          : teardownOf(d, failedSince[d.id] ?? r.startedAt),
      );
      continue;
    }
    inFlight[d.id] = r;
  }

  if (enabled) {
    for (const [id, since] of Object.entries(failedSince)) {
      const d = byId.get(id)!;
      if (inFlight[id] || inOperation(d) || ageMs(since, now) < graceMs) continue;
      inFlight[id] = { domainId: id, phase: 'teardown', startedAt: at };
      actions.push(teardownOf(d, since));
    }
  }
  return { state: { failedSince, inFlight }, actions };
}

function teardownOf(d: DomainView, since: string): ReplacementAction {
  return {
    kind: 'teardown',
    domainId: d.id,
    slug: d.slug,
    failedSince: since,
    reason: `standby ${d.slug} failed since ${since}${d.lastError ? ` (${d.lastError})` : ''}: replacing it`,
  };
}

/** True when `state` holds a sighting or a replacement under way: only then does continue-as-new carry it on. */
export const hasReplacementState = (state: ReplacementState): boolean =>
  Object.keys(state.failedSince).length + Object.keys(state.inFlight).length > 0;
