import type { DomainSnapshot, FleetSnapshot, InferenceSlot } from '../schemas/entities';
import type { FleetPolicy } from '../schemas/policy';
import type { RouteTarget } from '../schemas/route-intent';

/** Weight of an eligible active in route intent: a gateway sends it all traffic (standbys weigh 0). */
export const ACTIVE_WEIGHT = 100;

/** Whether a domain in this state may take traffic: `ready`, or `degraded` (a problem seen, still answering). */
export const isDomainServing = (domain: Pick<DomainSnapshot, 'state'>): boolean =>
  domain.state === 'ready' || domain.state === 'degraded';

/**
 * Whether an inference slot's models may take traffic: `serving`, or `starting` (a layout just applied, not
 * yet observed; the monitor's first poll settles it). Sleeping, waking, probing, failed and stopped slots
 * may not: vLLM queues a request in a sleeping engine until a wake that may never come.
 */
export const isSlotServing = (slot: Pick<InferenceSlot, 'state'>): boolean =>
  slot.state === 'serving' || slot.state === 'starting';

/** Why a domain's model cannot take traffic now, for an error message; null when it can. */
export function ineligibility(domain: DomainSnapshot, model: string): string | null {
  if (!isDomainServing(domain)) return `domain ${domain.slug} is ${domain.state}`;
  for (const slot of domain.slots) {
    if (slot.kind !== 'inference' || !slot.models.some((m) => m.name === model)) continue;
    if (isSlotServing(slot)) return null;
    return `model "${model}" on domain ${domain.slug} is ${slot.state}`;
  }
  return `domain ${domain.slug} does not serve model "${model}"`;
}

/** One domain as a gateway sees it: where it serves, whether it may take traffic now, and with what weight. */
export function routeTarget(domain: DomainSnapshot, isActive: boolean): RouteTarget {
  const seen = new Set<string>();
  const models: RouteTarget['models'] = [];
  for (const slot of domain.slots) {
    if (slot.kind !== 'inference') continue;
    for (const m of slot.models) {
      if (seen.has(m.name)) continue;
      seen.add(m.name);
      models.push({ name: m.name, servingUrl: m.servingUrl, eligible: isDomainServing(domain) && isSlotServing(slot) });
    }
  }
  const eligible = isActive && models.some((m) => m.eligible);
  return {
    domainId: domain.id,
    domainSlug: domain.slug,
    endpointUrl: domain.servingBaseUrl ?? models[0]?.servingUrl ?? null,
    // A standby is never eligible: its models sleep until a promotion wakes them and moves the route.
    eligible,
    weight: eligible ? ACTIVE_WEIGHT : 0,
    models: models.map((m) => ({ ...m, eligible: isActive && m.eligible })),
  };
}

/** The fleet's active target (null without one) and every other domain as a standby with weight 0. */
export function routeTargets(snapshot: FleetSnapshot): { active: RouteTarget | null; standbys: RouteTarget[] } {
  const active = snapshot.domains.find((d) => d.id === snapshot.activeDomainId);
  return {
    active: active ? routeTarget(active, true) : null,
    standbys: snapshot.domains.filter((d) => d !== active).map((d) => routeTarget(d, false)),
  };
}

/**
 * Seconds a client should wait before retrying while a failover can come: detecting the failed active
 * (`failureThreshold` missed polls at `heartbeatIntervalMs`) plus stopping training on the standby
 * (`trainingStopGraceMs`), at least 1. An estimate from the policy, not a promise.
 */
export function expectedFailoverSeconds(
  policy: Pick<FleetPolicy, 'failureThreshold' | 'heartbeatIntervalMs' | 'trainingStopGraceMs'>,
): number {
  const ms = policy.failureThreshold * policy.heartbeatIntervalMs + policy.trainingStopGraceMs;
  return Math.max(1, Math.ceil(ms / 1000));
}
