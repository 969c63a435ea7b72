import type { FleetPolicy } from '../schemas/policy';
import type { FleetView } from './fleet-view';

/**
 * A host that is not in the shape its role needs, and what the monitor does about it:
 * - `restoreStandby`: a standby with a model awake or a training slot idle (a compensation that could not
 *   put everything back, a resumed step that woke it): put back from what its supervisor shows.
 * - `stopActiveTraining`: training runs on the active, beside the models serving traffic: stop it.
 */
export interface HostRepair {
  kind: 'restoreStandby' | 'stopActiveTraining';
  domainId: string;
  /** What the monitor saw, for the event and the health query (`models awake on the standby`, ...). */
  problem: string;
}

/** The health reason each repair is reported under. */
export const HOST_REPAIR_REASONS = {
  restoreStandby: 'standby_not_at_rest',
  stopActiveTraining: 'training_on_active',
} as const satisfies Record<HostRepair['kind'], string>;

/**
 * The repairs due after one look, from the slot states the monitor mirrors (core/domain-observation.ts).
 * None while an operation is in flight (its activities own the hosts until it ends); only domains the
 * monitor counts as up (ready or degraded); never a domain in `heldIds` (repaired within the retry interval:
 * a repair that could not finish is tried again after it, not at every poll). Pure.
 */
export function hostRepairsDue(fleet: FleetView, heldIds: readonly string[] = []): HostRepair[] {
  if (fleet.inFlightOperation) return [];
  const repairs: HostRepair[] = [];
  for (const d of fleet.domains) {
    if (!d.slots || (d.state !== 'ready' && d.state !== 'degraded') || heldIds.includes(d.id)) continue;
    const gpus = (kind: 'inference' | 'training', states: readonly string[]) =>
      d.slots!.filter((s) => s.kind === kind && states.includes(s.state)).map((s) => s.gpuIndex);
    if (d.id === fleet.activeDomainId) {
      const training = gpus('training', ['training']);
      if (training.length > 0) {
        repairs.push({
          kind: 'stopActiveTraining',
          domainId: d.id,
          problem: `training on the active (GPU ${training.join(', ')})`,
        });
      }
      continue;
    }
    const awake = gpus('inference', ['serving']);
    const idle = gpus('training', ['idle']);
    const problems = [
      ...(awake.length ? [`models awake on the standby (GPU ${awake.join(', ')})`] : []),
      ...(idle.length ? [`training not running on the standby (GPU ${idle.join(', ')})`] : []),
    ];
    if (problems.length > 0) repairs.push({ kind: 'restoreStandby', domainId: d.id, problem: problems.join('; ') });
  }
  return repairs;
}

/** How long after a repair the monitor leaves the domain alone before trying again. */
export const hostRepairRetryMs = (policy: FleetPolicy): number => Math.max(5_000, 25 * policy.heartbeatIntervalMs);
