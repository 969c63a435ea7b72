import {
  DOMAIN_STATES,
  type DomainState,
  INFERENCE_SLOT_STATES,
  type InferenceSlotState,
  OPERATION_STATES,
  type OperationState,
  TRAINING_SLOT_STATES,
  type TrainingSlotState,
} from './enums';

/** A state machine as data: for each state, the states it may move to. */
export type TransitionTable<S extends string> = Readonly<Record<S, readonly S[]>>;

/**
 * Domain lifecycle. `failed -> ready|degraded` is a recovery observed by the monitor; a failed domain
 * never becomes active again without a promotion.
 */
export const DOMAIN_TRANSITIONS: TransitionTable<DomainState> = {
  provisioning: ['ready', 'degraded', 'failed', 'stopping'],
  ready: ['degraded', 'failed', 'stopping'],
  degraded: ['ready', 'failed', 'stopping'],
  failed: ['ready', 'degraded', 'stopping', 'provisioning'],
  stopping: ['stopped', 'failed'],
  stopped: ['provisioning'],
};

/** Inference slot lifecycle: sleep/wake plus what the monitor observes on the host. */
export const INFERENCE_SLOT_TRANSITIONS: TransitionTable<InferenceSlotState> = {
  starting: ['serving', 'sleeping', 'failed', 'stopped'],
  serving: ['sleeping', 'failed', 'stopped'],
  sleeping: ['waking', 'serving', 'failed', 'stopped'],
  waking: ['probing', 'serving', 'sleeping', 'failed'],
  probing: ['serving', 'sleeping', 'failed'],
  failed: ['starting', 'serving', 'sleeping', 'stopped'],
  stopped: ['starting'],
};

/** Training slot lifecycle: a run is started, asked to stop, and exits (idle) or dies (failed). */
export const TRAINING_SLOT_TRANSITIONS: TransitionTable<TrainingSlotState> = {
  idle: ['training', 'failed', 'stopped'],
  training: ['stopping', 'idle', 'failed'],
  stopping: ['idle', 'failed'],
  failed: ['training', 'idle', 'stopped'],
  stopped: ['idle'],
};

/** Operation lifecycle. Terminal states have no way out. */
export const OPERATION_TRANSITIONS: TransitionTable<OperationState> = {
  pending: ['running', 'failed', 'cancelled'],
  running: ['succeeded', 'failed', 'cancelled'],
  succeeded: [],
  failed: [],
  cancelled: [],
};

export const ALL_TRANSITION_TABLES = {
  domain: { table: DOMAIN_TRANSITIONS, states: DOMAIN_STATES },
  inferenceSlot: { table: INFERENCE_SLOT_TRANSITIONS, states: INFERENCE_SLOT_STATES },
  trainingSlot: { table: TRAINING_SLOT_TRANSITIONS, states: TRAINING_SLOT_STATES },
  operation: { table: OPERATION_TRANSITIONS, states: OPERATION_STATES },
} as const;

/** True when `from -> to` is an edge of `table`. Staying in the same state is not a transition. */
export function canTransition<S extends string>(table: TransitionTable<S>, from: S, to: S): boolean {
  return table[from].includes(to);
}

/** Every state from which `to` may be reached: the `WHERE state IN (...)` of a guarded UPDATE. */
export function predecessorsOf<S extends string>(table: TransitionTable<S>, to: S): S[] {
  return (Object.keys(table) as S[]).filter((from) => table[from].includes(to));
}

/** Thrown before any SQL runs when a caller asks for an edge the table does not have. */
export class InvalidTransitionError extends Error {
  constructor(
    readonly machine: string,
    readonly from: string,
    readonly to: string,
  ) {
    super(`${machine}: ${from} -> ${to} is not an allowed transition`);
    this.name = 'InvalidTransitionError';
  }
}

/** Throws InvalidTransitionError unless `from -> to` is in `table`. */
export function assertTransition<S extends string>(machine: string, table: TransitionTable<S>, from: S, to: S): void {
  if (!canTransition(table, from, to)) throw new InvalidTransitionError(machine, from, to);
}
