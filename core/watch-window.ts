import type { FleetView } from './fleet-view';

/**
 * The fleet monitor counts only time it has been looking. A heartbeat, a degradation or a failure
 * recorded before it began to look (a control-plane outage: worker down, Postgres restored) says nothing
 * about how long the monitor has watched it, so such a time is dated to when the looking began. Three
 * clocks start at three moments, all by this one rule:
 * - staleness counts from this watch attempt's start (`heardSince`, which dates the silence, never the sighting);
 * - the degraded grace counts from `watchingSince`, carried from watch to watch while they follow one
 *   another without a gap (`openWatchWindow`, `continuityAfterWatch`, `degradedSince`);
 * - a failed standby's replacement grace counts from the workflow's start of the watch that saw it
 *   (`countedFrom`, in `planStandbyReplacements`).
 */

/**
 * What one watch hands the next, in workflow state and across continue-as-new: since when the watches
 * have followed one another without a gap, and when the last one looked (ISO). Both absent before the
 * first watch returned (and in executions from before they existed).
 */
export interface WatchContinuity {
  watchingSince?: string;
  lookedUntil?: string;
}

/** One watch attempt's window, in epoch ms: when it began to look, and since when the monitor has looked without a gap. */
export interface WatchWindow {
  startedAtMs: number;
  watchingSinceMs: number;
}

/** True when `iso` lies within looking that began at `sinceMs`. An unparsable time never does. */
export const isWithinWatch = (iso: string, sinceMs: number): boolean => Date.parse(iso) >= sinceMs;

/** The time the monitor may count from for something recorded at `iso`: `iso`, or `since` (ISO) when it lies before. */
export const countedFrom = (iso: string, since: string): string =>
  isWithinWatch(iso, Date.parse(since)) ? iso : since;

/**
 * Staleness counts only time this watch has been looking: each domain carries the watch's start
 * (`watchedFrom`), and silence from before it is not held against it (`silenceMs` in core/domain-health.ts),
 * so one slow first poll after an outage does not fail over a healthy active. A domain that really stopped
 * answering still fails by `failureThreshold` (every poll has a timeout). `lastSeenAt` stays as heard: it is
 * what every age shown to an operator is taken from.
 */
export function heardSince(fleet: FleetView, watchStartedAtMs: number): FleetView {
  const watchedFrom = new Date(watchStartedAtMs).toISOString();
  return { ...fleet, domains: fleet.domains.map((d) => ({ ...d, watchedFrom })) };
}

/**
 * The degraded grace counts only time the monitor has been looking: a domain degraded since before
 * `watchingSinceMs` is dated to it. Otherwise a degradation recorded before an outage would fail the
 * active over on the first look after it, without the grace ever being watched.
 */
export function degradedSince(fleet: FleetView, watchingSinceMs: number): FleetView {
  const since = new Date(watchingSinceMs).toISOString();
  return {
    ...fleet,
    domains: fleet.domains.map((d) =>
      d.state !== 'degraded' || isWithinWatch(d.stateChangedAt, watchingSinceMs) ? d : { ...d, stateChangedAt: since },
    ),
  };
}

/**
 * Since when the monitor has been looking without a gap (epoch ms). The carried `watchingSince` goes on
 * when this is a first attempt that started within `maxGapMs` of the last look; otherwise (the first
 * watch, a retry after a dead worker, a watch that waited in the queue or behind a paused workflow)
 * counting starts again at this attempt's start. Never later than `startedAtMs`. One rule for every gap.
 */
export function watchingSinceMs(
  carried: WatchContinuity,
  attempt: number,
  startedAtMs: number,
  maxGapMs: number,
): number {
  const since = carried.watchingSince ? Date.parse(carried.watchingSince) : Number.NaN;
  const lastLook = carried.lookedUntil ? Date.parse(carried.lookedUntil) : Number.NaN;
  const followsOn = attempt === 1 && startedAtMs - lastLook <= maxGapMs;
  return followsOn && Number.isFinite(since) ? Math.min(since, startedAtMs) : startedAtMs;
}

/** The window of a watch attempt that began at `startedAtMs` (see `watchingSinceMs`). */
export const openWatchWindow = (
  carried: WatchContinuity,
  attempt: number,
  startedAtMs: number,
  maxGapMs: number,
): WatchWindow => ({ startedAtMs, watchingSinceMs: watchingSinceMs(carried, attempt, startedAtMs, maxGapMs) });

/** The fleet as a watch with `window` may judge it: silences and degradations dated to its looking. */
export const watchedFleet = (fleet: FleetView, window: WatchWindow): FleetView =>
  degradedSince(heardSince(fleet, window.startedAtMs), window.watchingSinceMs);

/**
 * What the workflow carries on after a watch: the `watchingSince` the watch reported (the carried one
 * when it reported none), and as the last look the watch's own `observedAt`, or `now` when it was woken
 * without a result (a pause before the workflow's task ran still counts as a gap).
 */
export const continuityAfterWatch = (
  carried: WatchContinuity,
  watched: { observedAt: string; watchingSince?: string } | null,
  now: string,
): WatchContinuity => ({
  watchingSince: watched?.watchingSince ?? carried.watchingSince,
  lookedUntil: watched?.observedAt ?? now,
});
