import type { DomainState, OperationKind, OperationState, Provider, SlotState } from '../schemas/enums';
import type { FleetSnapshot } from '../schemas/entities';

/**
 * The compact picture of one domain that every decision in `core/` works from. It is built from a
 * FleetSnapshot by the monitor's activity and travels through workflow history, so it carries only what a
 * decision reads.
 */
export interface DomainView {
  id: string;
  slug: string;
  state: DomainState;
  /** Who manages its machines; absent in views recorded before it was added (read as unknown). */
  provider?: Provider;
  /** ISO time of the last state change (the start of a degraded spell). */
  stateChangedAt: string;
  /**
   * ISO time the watcher last heard the domain (the worker's receive time of the last answer that counted as a
   * sighting); null when never. Never re-dated: every age shown is taken from it (core/sighting.ts).
   */
  lastSeenAt: string | null;
  /**
   * ISO start of the watch (or look) that produced this view: silence from before it is not held against the
   * domain (core/watch-window.ts). Absent in views from before it was added, whose `lastSeenAt` was re-dated
   * to the watch's start instead.
   */
  watchedFrom?: string;
  consecutiveFailures: number;
  lastError: string | null;
  /** Names of every model bound in the domain's inference slots, sorted. */
  modelNames: string[];
  /** GPU indexes of the domain's training slots, ascending. */
  trainingGpus: number[];
  /**
   * Every slot with the state the monitor last mirrored from the host (by kind, then GPU); absent in
   * views recorded before it was added (no host repair is judged from those).
   */
  slots?: { kind: 'inference' | 'training'; gpuIndex: number; state: SlotState }[];
}

/** The fleet's in-flight operation (pending or running), as decisions need it. */
export interface OperationView {
  id: string;
  kind: OperationKind;
  state: OperationState;
  targetDomainId: string;
  createdAt: string;
  /** Routing moved: only the old active's demotion remains (absent in views recorded before it was added). */
  routingCommitted?: boolean;
}

/** A fleet as the monitor sees it after one round of polls. */
export interface FleetView {
  id: string;
  slug: string;
  /** The routing pointer; null for a fleet with no serving domain. */
  activeDomainId: string | null;
  routeRevision: number;
  domains: DomainView[];
  inFlightOperation: OperationView | null;
}

/** Projects a snapshot onto the view decisions use. Pure; sorts lists so equal fleets give equal views. */
export function toFleetView(snapshot: FleetSnapshot): FleetView {
  const op = snapshot.inFlightOperation;
  return {
    id: snapshot.id,
    slug: snapshot.slug,
    activeDomainId: snapshot.activeDomainId,
    routeRevision: snapshot.routeRevision,
    domains: snapshot.domains.map((d) => ({
      id: d.id,
      slug: d.slug,
      state: d.state,
      provider: d.provider,
      stateChangedAt: d.stateChangedAt,
      lastSeenAt: d.lastSeenAt,
      consecutiveFailures: d.consecutiveFailures,
      lastError: d.lastError,
      modelNames: d.slots.flatMap((s) => (s.kind === 'inference' ? s.models.map((m) => m.name) : [])).sort(),
      trainingGpus: d.slots
        .filter((s) => s.kind === 'training')
        .map((s) => s.gpuIndex)
        .sort((a, b) => a - b),
      slots: d.slots
        .map((s) => ({ kind: s.kind, gpuIndex: s.gpuIndex, state: s.state }))
        .sort((a, b) => a.kind.localeCompare(b.kind) || a.gpuIndex - b.gpuIndex),
    })),
    inFlightOperation: op
      ? {
          id: op.id,
          kind: op.kind,
          state: op.state,
          targetDomainId: op.targetDomainId,
          createdAt: op.createdAt,
          routingCommitted: op.routingCommitted,
        }
      : null,
  };
}

/** The fleet's active domain, or null when the pointer is unset or names no listed domain. */
export function activeDomainOf(fleet: FleetView): DomainView | null {
  return fleet.domains.find((d) => d.id === fleet.activeDomainId) ?? null;
}

/** Milliseconds between an ISO time and `now`; never negative (clock skew reads as zero). */
export function ageMs(iso: string, now: Date): number {
  return Math.max(0, now.getTime() - Date.parse(iso));
}
