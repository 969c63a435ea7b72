import {
  TRAINING_JOB_TRANSITIONS,
  type TrainingJob,
  type TrainingJobEvent,
  type TrainingJobRefusalCode,
  type TrainingJobState,
  WAITING_TRAINING_JOB_STATES,
} from '../schemas/training-job';

/** What of a job its state machine reads and writes; the rest of the row passes through unchanged. */
export type JobMachineFields = Pick<
  TrainingJob,
  'state' | 'steps' | 'runGeneration' | 'domainId' | 'gpuIndex' | 'preemptedAtStep' | 'checkpoint' | 'reason'
>;

export type JobTransition<J extends JobMachineFields> =
  { ok: true; job: J } | { ok: false; code: TrainingJobRefusalCode; reason: string };

const refuse = (code: TrainingJobRefusalCode, reason: string) => ({ ok: false as const, code, reason });

/** The job in `to`, unless its table has no edge from the job's state there. */
function moveTo<J extends JobMachineFields>(job: J, to: TrainingJobState, changes: Partial<J>): JobTransition<J> {
  if (!TRAINING_JOB_TRANSITIONS[job.state].includes(to)) {
    return refuse('illegal_transition', `a ${job.state} job cannot become ${to}`);
  }
  return { ok: true, job: { ...job, ...changes, state: to } };
}

/**
 * Fencing: only the trainer of the job's current run speaks for it. A trainer of an older generation (one that
 * was preempted, or lost, while a newer run started) is refused, so it can never commit a checkpoint or end the
 * job under the run that replaced it.
 */
function staleGeneration(job: JobMachineFields, generation: number) {
  if (generation === job.runGeneration) return null;
  return refuse('stale_generation', `run generation ${generation} is not the job's current run (${job.runGeneration})`);
}

/**
 * The job after `event`, or why the event is refused (nothing changes then). Pure: timestamps and the audit
 * trail are the store's (db/repo/training-jobs.ts).
 */
export function nextJobState<J extends JobMachineFields>(job: J, event: TrainingJobEvent): JobTransition<J> {
  switch (event.type) {
    case 'start':
      return moveTo(job, 'running', {
        runGeneration: job.runGeneration + 1,
        domainId: event.domainId,
        gpuIndex: event.gpuIndex,
        preemptedAtStep: null,
      } as Partial<J>);
    case 'checkpointCommitted': {
      const stale = staleGeneration(job, event.generation);
      if (stale) return stale;
      if (job.state !== 'running') {
        return refuse('illegal_transition', `a ${job.state} job commits no checkpoint: only a running one does`);
      }
      if (event.step > job.steps) {
        return refuse('invalid_checkpoint', `step ${event.step} is beyond the job's ${job.steps} steps`);
      }
      // A retried commit of the same step is taken again; a step behind the last one would lose progress.
      if (job.checkpoint && event.step < job.checkpoint.step) {
        return refuse('invalid_checkpoint', `step ${event.step} is behind the committed step ${job.checkpoint.step}`);
      }
      const checkpoint = { step: event.step, path: event.path, generation: event.generation };
      return { ok: true, job: { ...job, checkpoint } };
    }
    case 'preempt':
      return (
        staleGeneration(job, event.generation) ??
        moveTo(job, 'preempted', { preemptedAtStep: job.checkpoint?.step ?? 0 } as Partial<J>)
      );
    case 'succeed':
      return staleGeneration(job, event.generation) ?? moveTo(job, 'succeeded', {});
    case 'fail': {
      if (event.generation !== undefined) {
        const stale = staleGeneration(job, event.generation);
        if (stale) return stale;
      } else if (job.state === 'running') {
        return refuse('illegal_transition', 'a running job fails with its run generation');
      }
      return moveTo(job, 'failed', { preemptedAtStep: null, reason: event.reason } as Partial<J>);
    }
    case 'cancel':
      return moveTo(job, 'cancelled', {
        preemptedAtStep: null,
        reason: event.reason ?? 'cancelled',
      } as Partial<J>);
  }
}

/** What the scheduler offers: a free training slot and the base models it can train. */
export interface TrainingSlotOffer {
  baseModels: readonly string[];
}

type QueuedJob = Pick<TrainingJob, 'id' | 'state' | 'baseModel' | 'priority' | 'createdAt'>;

/**
 * The job to run next in `slot`: of the waiting jobs (queued or preempted) whose base model the slot can train,
 * the highest priority, then the oldest (a preempted job keeps its place), then the lowest id so the pick
 * never depends on the queue's order. Null when none fits.
 */
export function pickNextJob<J extends QueuedJob>(queue: readonly J[], slot: TrainingSlotOffer): J | null {
  const waiting: readonly TrainingJobState[] = WAITING_TRAINING_JOB_STATES;
  let best: J | null = null;
  for (const job of queue) {
    if (!waiting.includes(job.state) || !slot.baseModels.includes(job.baseModel)) continue;
    if (!best || runsBefore(job, best)) best = job;
  }
  return best;
}

function runsBefore(a: QueuedJob, b: QueuedJob): boolean {
  if (a.priority !== b.priority) return a.priority > b.priority;
  const ageOrder = Date.parse(a.createdAt) - Date.parse(b.createdAt);
  if (ageOrder !== 0) return ageOrder < 0;
  return a.id < b.id;
}
