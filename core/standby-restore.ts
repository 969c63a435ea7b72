import type { SupervisorStatus } from '../schemas/supervisor';

/** The part of a domain's layout a standby restore needs: which models live on which GPU, which GPUs train. */
export interface StandbyLayout {
  inference: { gpuIndex: number; models: string[] }[];
  trainingGpus: number[];
}

/**
 * What to do to put a standby back in its resting state, from what its supervisor shows now: sleep every
 * GPU with a model awake, start training on every idle training GPU whose models are all asleep. What
 * cannot be put back is named in `unrestorable`: a model that does not answer cannot be put to sleep, and
 * training is not started on its GPU (a hung engine may still hold the memory the trainer needs).
 */
export interface StandbyRestorePlan {
  sleepGpus: number[];
  startTrainingGpus: number[];
  unrestorable: string[];
}

/**
 * Plans the restore of a standby per GPU and per model from the observed `status` (never from what an
 * earlier step believed it did). Pure. Called again after the sleeps: a GPU whose models were awake gets
 * its training started once they report asleep. An empty plan (no actions, nothing unrestorable) means the
 * standby is at rest.
 */
export function planStandbyRestore(layout: StandbyLayout, status: SupervisorStatus): StandbyRestorePlan {
  const sleepGpus = new Set<number>();
  const unrestorable: string[] = [];
  // Per GPU, the models that do not answer: they keep its training from being started.
  const silent = new Map<number, string[]>();
  for (const slot of layout.inference) {
    for (const name of slot.models) {
      const model = status.models.find((m) => m.name === name);
      if (model?.state === 'awake') sleepGpus.add(slot.gpuIndex);
      if (model && model.state !== 'unknown') continue;
      const why = model
        ? `model ${name} on GPU ${slot.gpuIndex} does not answer${model.error ? ` (${model.error})` : ''}`
        : `model ${name} on GPU ${slot.gpuIndex} is not reported`;
      unrestorable.push(`${why}: cannot be put to sleep`);
      silent.set(slot.gpuIndex, [...(silent.get(slot.gpuIndex) ?? []), name]);
    }
  }
  const startTrainingGpus: number[] = [];
  for (const gpu of layout.trainingGpus) {
    const run = status.training.find((r) => r.gpuIndex === gpu);
    if (!run) unrestorable.push(`training on GPU ${gpu} is not configured on the supervisor`);
    else if (run.state === 'stopping') unrestorable.push(`training on GPU ${gpu} is still stopping`);
    else if (run.state === 'running') continue;
    else if (silent.has(gpu)) {
      unrestorable.push(`training not restarted on GPU ${gpu}: ${silent.get(gpu)!.join(', ')} does not answer`);
    } else if (!sleepGpus.has(gpu)) startTrainingGpus.push(gpu);
    // A GPU with a model awake trains once the sleep has put it down (the next plan, after the sleeps).
  }
  return { sleepGpus: [...sleepGpus].sort((a, b) => a - b), startTrainingGpus, unrestorable };
}

/** True when the plan has nothing to do and nothing to report: the standby is at rest. */
export const isAtRest = (plan: StandbyRestorePlan): boolean =>
  plan.sleepGpus.length === 0 && plan.startTrainingGpus.length === 0 && plan.unrestorable.length === 0;

/** True when the plan has a sleep or a training start to make (what is unrestorable alone is not work). */
export const hasActions = (plan: StandbyRestorePlan): boolean =>
  plan.sleepGpus.length > 0 || plan.startTrainingGpus.length > 0;
