import { type DomainRole, domainRole } from '../../core/domain-role';
import { activeDomainOf, toFleetView } from '../../core/fleet-view';
import { sightingOf } from '../../core/sighting';
import { type NonViableReason, standbyViability } from '../../core/standby-ranking';
import type { DomainState, InferenceSlotState } from '../../schemas/enums';
import type { DomainSnapshot, FleetSnapshot } from '../../schemas/entities';
import type { GpuMemory } from '../../schemas/supervisor';
import type { HostReading } from '../../schemas/status';
import { agoText } from './ages';

/** How a fact reads at a glance: fine, needs a look, or needs someone now. */
export type Tone = 'ok' | 'warn' | 'bad';

/** One domain as the fleet page shows it. */
export interface DomainRow {
  slug: string;
  role: DomainRole;
  state: DomainState;
  tone: Tone;
  /** When the watcher last heard it (`sightingOf`): `12 s ago`, `never`. */
  heard: string;
  isStale: boolean;
  consecutiveFailures: number;
  lastError: string | null;
  /** Each model with its slot's state (`awake`, `asleep`, …), `unknown` while the host's report is not current. */
  models: { name: string; gpuIndex: number; state: string }[];
  /** Each training slot's state, `unknown` likewise. */
  training: { gpuIndex: number; state: string }[];
  /** Memory per GPU as its host answered now (`GPU 0: 12.3 / 80.0 GiB`); null when not known. */
  gpuMemory: string[] | null;
  /** A standby's readiness to take over (`ready to take over`, `not ready: …`); null for the active. */
  takeover: { isReady: boolean; text: string } | null;
}

const MODEL_STATE: Record<InferenceSlotState, string> = {
  serving: 'awake',
  sleeping: 'asleep',
  waking: 'waking',
  probing: 'probing',
  starting: 'starting',
  failed: 'failed',
  stopped: 'stopped',
};

const NOT_VIABLE: Record<NonViableReason, (d: DomainSnapshot) => string> = {
  is_active: () => 'it is the active',
  not_ready: (d) => `it is ${d.state}`,
  stale: () => 'not heard recently',
  consecutive_failures: (d) => `${d.consecutiveFailures} missed polls`,
  no_inference: () => 'it serves no model',
  missing_models: () => 'it lacks a model the active serves',
};

const MIB_PER_GIB = 1024;
const gib = (mib: number) => (mib / MIB_PER_GIB).toFixed(1);

/** One GPU's memory: `GPU 0: 12.3 / 80.0 GiB`, `GPU 0: 12.3 GiB used` without a total, or why it is unknown. */
export function gpuMemoryText(gpu: Pick<GpuMemory, 'index' | 'usedMiB' | 'totalMiB' | 'error'>): string {
  if (gpu.error || gpu.usedMiB === null) return `GPU ${gpu.index}: unreadable`;
  return gpu.totalMiB === null
    ? `GPU ${gpu.index}: ${gib(gpu.usedMiB)} GiB used`
    : `GPU ${gpu.index}: ${gib(gpu.usedMiB)} / ${gib(gpu.totalMiB)} GiB`;
}

/**
 * Every domain of the fleet at `now`: its role, its sighting (`sightingOf`, the age every view shows), its
 * models and training as the watcher last mirrored them (unknown once that is not current), its GPU memory
 * from `hosts` (the host read now; absent: not known) and, for each non-active, whether it could take over
 * (`standbyViability`, the monitor's rule). Pure.
 */
export function domainRows(fleet: FleetSnapshot, hosts: ReadonlyMap<string, HostReading>, now: Date): DomainRow[] {
  const view = toFleetView(fleet);
  const active = activeDomainOf(view);
  return fleet.domains.map((d) => {
    const isActive = d.id === fleet.activeDomainId;
    const sighting = sightingOf(d, fleet.policy.heartbeatStaleMs, now);
    const known = sighting.isReportCurrent;
    const viability = isActive
      ? null
      : standbyViability(
          view.domains.find((v) => v.id === d.id)!,
          active,
          fleet.policy,
          now,
        );
    const host = hosts.get(d.id);
    const tone: Tone =
      d.state === 'failed' || sighting.isStale
        ? 'bad'
        : d.state !== 'ready' || viability?.isViable === false
          ? 'warn'
          : 'ok';
    return {
      slug: d.slug,
      role: domainRole(d.state, isActive),
      state: d.state,
      tone,
      heard: agoText(sighting.ageMs),
      isStale: sighting.isStale,
      consecutiveFailures: d.consecutiveFailures,
      lastError: d.lastError,
      models: d.slots.flatMap((s) =>
        s.kind === 'inference'
          ? s.models.map((m) => ({
              name: m.name,
              gpuIndex: s.gpuIndex,
              state: known ? MODEL_STATE[s.state] : 'unknown',
            }))
          : [],
      ),
      training: d.slots.flatMap((s) =>
        s.kind === 'training' ? [{ gpuIndex: s.gpuIndex, state: known ? s.state : 'unknown' }] : [],
      ),
      gpuMemory: host?.isReachable && host.gpus.length > 0 ? host.gpus.map(gpuMemoryText) : null,
      takeover: viability && {
        isReady: viability.isViable,
        text: viability.isViable
          ? 'ready to take over'
          : `not ready: ${viability.reasons.map((r) => NOT_VIABLE[r](d)).join(', ')}`,
      },
    };
  });
}
