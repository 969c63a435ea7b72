import type { DomainState, OperationKind } from '../schemas/enums';

/**
 * Where a target is checked, each against what it can see:
 * - `request`: the API, on the snapshot the caller acts on (a user asking to move traffic);
 * - `insert`: the state store, as it writes the operation row (every requester, the monitor's included);
 * - `begin`: `beginOperation`, when the workflow starts (the pointer may have moved since the request).
 */
export const TARGET_CHECK_MOMENTS = ['request', 'insert', 'begin'] as const;
export type TargetCheckMoment = (typeof TARGET_CHECK_MOMENTS)[number];

/** The part of a domain the rule reads (a DomainSnapshot fits). */
export interface TargetDomain {
  id: string;
  slug: string;
  state: DomainState;
  slots: readonly ({ kind: 'inference'; models: readonly unknown[] } | { kind: 'training' })[];
}

export const TARGET_PROBLEMS = ['not_in_fleet', 'is_active', 'not_ready', 'no_inference_models'] as const;
export type TargetProblemCode = (typeof TARGET_PROBLEMS)[number];

/** Why a domain cannot be the target; `message` names the domain and the fleet by slug. */
export interface TargetProblem {
  code: TargetProblemCode;
  message: string;
}

export interface OperationTargetInput {
  moment: TargetCheckMoment;
  kind: OperationKind;
  fleet: { slug: string; activeDomainId: string | null };
  /** How the caller named the target (an id or a slug), for the message when it is not in the fleet. */
  targetRef: string;
  /** The target as found among the fleet's domains; null when it is not one of them. */
  target: TargetDomain | null;
  /** `begin` only: the operation already moved the pointer (a promotion's target is then the active). */
  isRoutingCommitted?: boolean;
}

/**
 * The one rule for a valid promote or demote target (null: valid). At every moment the target must be a domain
 * of the fleet, and a promotion's must serve at least one model from an inference slot: facts of the layout
 * that hold for the operation's whole life. The pointer is checked where it is read (`request`, `begin`): the
 * target must not be the active, unless a promotion committed it. Its state (ready or degraded) only at
 * `request`: later, the promotion's own steps (wake, probe) prove whether the host serves.
 */
export function operationTargetProblem(input: OperationTargetInput): TargetProblem | null {
  const { moment, kind, fleet, target } = input;
  if (!target) return { code: 'not_in_fleet', message: `domain ${input.targetRef} is not in fleet ${fleet.slug}` };
  const checksPointer = moment !== 'insert';
  const isCommittedPromotion = kind === 'promote' && moment === 'begin' && input.isRoutingCommitted === true;
  if (checksPointer && target.id === fleet.activeDomainId && !isCommittedPromotion) {
    return { code: 'is_active', message: `domain ${target.slug} is the active domain of fleet ${fleet.slug}` };
  }
  if (moment === 'request' && target.state !== 'ready' && target.state !== 'degraded') {
    return {
      code: 'not_ready',
      message: `domain ${target.slug} is ${target.state}; only a ready or degraded domain can be targeted`,
    };
  }
  if (kind === 'promote' && !target.slots.some((s) => s.kind === 'inference' && s.models.length > 0)) {
    return { code: 'no_inference_models', message: `domain ${target.slug} has no inference models` };
  }
  return null;
}
