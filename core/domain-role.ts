import type { DomainState } from '../schemas/enums';

/** What a domain is to its fleet, as every view shows it (`haru fleet status`, `/ui`). */
export type DomainRole = 'active' | 'standby' | Exclude<DomainState, 'ready' | 'degraded'>;

/**
 * The role a domain plays: `active` for the routing pointer's, `standby` only while it could take over (ready or
 * degraded), else its state: a dead old active reads `failed`, never `standby`. Pure.
 */
export function domainRole(state: DomainState, isActive: boolean): DomainRole {
  if (isActive) return 'active';
  return state === 'ready' || state === 'degraded' ? 'standby' : state;
}
