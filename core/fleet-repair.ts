import type { Operation } from '../schemas/entities';
import type { FleetView } from './fleet-view';
import { hostRepairsDue } from './host-repair';
import { orphanEnding } from './orphaned-operation';

/**
 * One step of `haru fleet repair` (`POST /v1/fleets/:fleet/repair`), which re-establishes what lets a fleet
 * fail over by itself:
 * - `end_orphaned_operation`: the in-flight operation's workflow has closed (or never existed while the row
 *   is `running`): the row is ended as the worker's keeper would (docs/architecture.md §4.10);
 * - `start_operation`: a `pending` operation whose workflow was never started: started now;
 * - `repair_host`: a standby not at rest or training on the active (core/host-repair.ts): the monitor's
 *   next look, which the repair asks for, carries it out;
 * - `ensure_monitor`: always, last: the monitor is started if none runs and looks at once (`checkNow`).
 */
export type FleetRepairStep =
  | { kind: 'end_orphaned_operation'; operationId: string; why: string }
  | { kind: 'start_operation'; operationId: string; why: string }
  | { kind: 'repair_host'; domainId: string; repair: 'restoreStandby' | 'stopActiveTraining'; why: string }
  | { kind: 'ensure_monitor'; why: string };

export interface FleetRepairInput {
  fleet: FleetView;
  /** The fleet's in-flight operation as stored; null when none. */
  operation: Operation | null;
  /** Temporal's status of that operation's workflow (`RUNNING`, `FAILED`, ...); null when it does not exist. */
  workflowStatus: string | null;
}

/** The steps that repair the fleet, in the order they are carried out. Pure. */
export function planFleetRepair(input: FleetRepairInput): FleetRepairStep[] {
  const steps: FleetRepairStep[] = [];
  const op = input.operation;
  let inFlight = op !== null;
  if (op && input.workflowStatus === null && op.state === 'pending') {
    steps.push({ kind: 'start_operation', operationId: op.id, why: `pending operation ${op.id} has no workflow` });
  } else if (op && input.workflowStatus !== 'RUNNING') {
    const ending = orphanEnding(op, input.workflowStatus ?? 'NOT_FOUND');
    if (ending) {
      steps.push({ kind: 'end_orphaned_operation', operationId: op.id, why: ending.message });
      inFlight = false;
    }
  }
  const fleet = inFlight ? input.fleet : { ...input.fleet, inFlightOperation: null };
  for (const r of hostRepairsDue(fleet)) {
    steps.push({ kind: 'repair_host', domainId: r.domainId, repair: r.kind, why: r.problem });
  }
  steps.push({ kind: 'ensure_monitor', why: 'the monitor is started if none runs, and looks at once' });
  return steps;
}
