import type { AutoFailoverPause } from '../schemas/entities';
import type { FleetPolicy } from '../schemas/policy';
import type { FleetView } from './fleet-view';

/**
 * One observation of a fleet after a round of polls: the input of every monitor decision. A look of the
 * monitor's own returns one; a watch shard signals one when a decision is due or at the checkpoint.
 */
export interface FleetObservation {
  fleet: FleetView;
  policy: FleetPolicy;
  /** The fleet's stored pause of automatic failover (null: not paused): the pause the monitor obeys. */
  autoFailoverPause: AutoFailoverPause | null;
  /** When the round that produced `fleet` ended (ISO); decisions use it as `now`. */
  observedAt: string;
  /**
   * Why it was made: `decision_due` (a shard found something to decide), `checkpoint` (a shard's routine
   * signal, so the monitor's `health` stays fresh), `immediate` (the monitor's own look: its start,
   * `checkNow`, a pause or resume).
   */
  reason: 'decision_due' | 'immediate' | 'checkpoint';
  /** Rounds of polls behind it: the look's one, or the shard's rounds of this fleet in its current watch. */
  polls: number;
  /** Since when the fleet has been watched without a gap (ISO): a look's own start, or the shard's window. */
  watchingSince?: string;
}
