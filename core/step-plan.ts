import { DEMOTION_STEPS, PROMOTION_STEPS } from '../schemas/operation-steps';

export type PromotionStep = (typeof PROMOTION_STEPS)[number];
export type DemotionStep = (typeof DEMOTION_STEPS)[number];

/** One step of a plan; `skipReason` is null for a step that runs. */
export interface PlannedStep<S extends string> {
  step: S;
  skipReason: string | null;
}

/** The promotion steps that must all succeed before routing moves; a failure here runs compensation. */
export const PRE_COMMIT_STEPS = [
  'stopTraining',
  'verifyGpuReleased',
  'wakeModels',
  'probeModels',
] as const satisfies readonly PromotionStep[];

export interface PromotionPlanInput {
  targetDomainId: string;
  /** The active domain when the operation began; null when the fleet had none. */
  fromDomainId: string | null;
  /** Training slots in the target's layout. */
  trainingSlotCount: number;
  /** The operation already moved routing (a re-run after a commit): only the tail remains. */
  isRoutingCommitted: boolean;
}

/**
 * The promotion's steps in order, each marked to run or skipped with a reason. Training steps are skipped
 * for a target without training slots; everything before the commit is skipped when routing was already
 * committed by this operation; demoting the old active is skipped when there is none.
 */
export function planPromotion(input: PromotionPlanInput): PlannedStep<PromotionStep>[] {
  return PROMOTION_STEPS.map((step) => {
    let skipReason: string | null = null;
    const isPreCommit = (PRE_COMMIT_STEPS as readonly string[]).includes(step);
    if (isPreCommit && input.isRoutingCommitted) skipReason = 'routing already committed by this operation';
    else if ((step === 'stopTraining' || step === 'verifyGpuReleased') && input.trainingSlotCount === 0) {
      skipReason = 'target has no training slots';
    } else if (
      step === 'demoteOldActive' &&
      (input.fromDomainId === null || input.fromDomainId === input.targetDomainId)
    ) {
      skipReason = 'no previous active domain';
    }
    return { step, skipReason };
  });
}

/** The demotion's steps: training is skipped for a domain without training slots. */
export function planDemotion(input: { trainingSlotCount: number }): PlannedStep<DemotionStep>[] {
  return DEMOTION_STEPS.map((step) => ({
    step,
    skipReason: step === 'startTraining' && input.trainingSlotCount === 0 ? 'domain has no training slots' : null,
  }));
}

/** What compensation does to put a promotion target back on standby. */
export type CompensationAction = 'sleepModels' | 'startTraining';

/**
 * The compensation for a promotion that stopped before committing, given the steps it started: models
 * go back to sleep once waking began (sleep first, so the VRAM is free), then training restarts once
 * stopping it began. Empty when nothing was touched.
 */
export function compensationFor(startedSteps: readonly PromotionStep[]): CompensationAction[] {
  const actions: CompensationAction[] = [];
  if (startedSteps.includes('wakeModels') || startedSteps.includes('probeModels')) actions.push('sleepModels');
  if (startedSteps.includes('stopTraining') || startedSteps.includes('verifyGpuReleased')) {
    actions.push('startTraining');
  }
  return actions;
}
