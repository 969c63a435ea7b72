import type { DomainSnapshot, FleetSnapshot, InferenceSlot } from '../../schemas/entities';

/** One served model of an inference slot: its name, servingUrl and the `upstreamAuth` its vLLM wants. */
export type ModelBinding = InferenceSlot['models'][number];
import { HaruError } from '../../schemas/errors';
import { ineligibility, isDomainServing, isSlotServing } from '../../core/route-eligibility';

// The endpoints and the upstream URL builder live in core/ (the promotion's serving-URL probe builds the same
// URLs); the proxy reads them from here.
export { INFERENCE_ENDPOINTS, type InferenceEndpoint, upstreamUrl } from '../../core/serving-url';

/** The fleet's active domain, or null when the routing pointer is empty or dangling. */
export function activeDomain(snapshot: FleetSnapshot): DomainSnapshot | null {
  return snapshot.domains.find((d) => d.id === snapshot.activeDomainId) ?? null;
}

/**
 * Model name -> its binding (servingUrl, upstreamAuth) for every inference slot of `domain`, in layout order;
 * with `eligibleOnly`, only the models that may take traffic now (the domain ready or degraded, the slot serving).
 */
export function domainModels(domain: DomainSnapshot, eligibleOnly = false): Map<string, ModelBinding> {
  const models = new Map<string, ModelBinding>();
  if (eligibleOnly && !isDomainServing(domain)) return models;
  for (const slot of domain.slots) {
    if (slot.kind !== 'inference' || (eligibleOnly && !isSlotServing(slot))) continue;
    for (const m of slot.models) if (!models.has(m.name)) models.set(m.name, m);
  }
  return models;
}

/** Where a request for `model` goes now, or the error to answer when nowhere. */
export type RouteTarget =
  | { kind: 'ok'; domain: DomainSnapshot; servingUrl: string; upstreamAuth: ModelBinding['upstreamAuth'] }
  | { kind: 'error'; error: HaruError };

/**
 * Picks the upstream for `model` on the active domain (exact name match), only where it may take traffic
 * now: a failed active or a sleeping slot is `domain_unavailable` (503), never sent a request.
 */
export function routeModel(snapshot: FleetSnapshot, model: string): RouteTarget {
  const domain = activeDomain(snapshot);
  if (!domain) {
    return { kind: 'error', error: new HaruError('no_active_domain', `fleet ${snapshot.slug} has no active domain`) };
  }
  // The binding of the first inference slot (layout order) that names `model`, as domainModels picks it,
  // found without building the map for a routed request.
  for (const slot of domain.slots) {
    if (slot.kind !== 'inference') continue;
    const binding = slot.models.find((m) => m.name === model);
    if (!binding) continue;
    const why = ineligibility(domain, model);
    if (!why) return { kind: 'ok', domain, servingUrl: binding.servingUrl, upstreamAuth: binding.upstreamAuth };
    return { kind: 'error', error: new HaruError('domain_unavailable', `fleet ${snapshot.slug}: ${why}`) };
  }
  const names = [...domainModels(domain).keys()];
  return {
    kind: 'error',
    error: new HaruError(
      'model_not_found',
      `model "${model}" is not served by fleet ${snapshot.slug}; routable models: ${names.length ? names.join(', ') : '(none)'}`,
    ),
  };
}

/** Why a request may wait for a route move instead of failing now; null when no move can come. */
export type HoldReason = 'promotion_in_flight' | 'auto_failover';

/**
 * Decides whether waiting can help (docs/architecture.md §5.4): a promotion is in flight toward a domain that binds
 * `model`, or auto-failover is on and not paused, the active is failing (or just refused us) and a viable standby binds
 * `model`. Pure: a function of the snapshot and what the proxy just saw.
 */
export function holdReason(snapshot: FleetSnapshot, model: string, upstreamRefused: boolean): HoldReason | null {
  const serves = (d: DomainSnapshot | undefined) => !!d && domainModels(d).has(model);
  const op = snapshot.inFlightOperation;
  if (op && op.kind === 'promote' && (op.state === 'pending' || op.state === 'running')) {
    if (serves(snapshot.domains.find((d) => d.id === op.targetDomainId))) return 'promotion_in_flight';
  }
  if (!snapshot.policy.autoFailover || snapshot.autoFailoverPause) return null;
  const active = activeDomain(snapshot);
  const activeFailing =
    upstreamRefused ||
    !active ||
    !isDomainServing(active) ||
    active.state === 'degraded' ||
    active.consecutiveFailures > 0;
  if (!activeFailing) return null;
  const viableStandby = snapshot.domains.some(
    (d) => d.id !== snapshot.activeDomainId && (d.state === 'ready' || d.state === 'degraded') && serves(d),
  );
  return viableStandby ? 'auto_failover' : null;
}

/** Why no automatic failover will move the route for `model` (holdReason said null), for the 503 message. */
export function noFailoverReason(snapshot: FleetSnapshot, model: string): string {
  const pause = snapshot.autoFailoverPause;
  if (pause) return `auto-failover is paused (by ${pause.by}${pause.reason ? `: ${pause.reason}` : ''})`;
  if (!snapshot.policy.autoFailover) return 'auto-failover is off for this fleet';
  return `no ready standby serves model "${model}"`;
}
