import { z } from 'zod';
import { isoDateSchema } from './entities';
import type { TransitionTable } from './transitions';
import { trainerParamNameSchema, trainerParamValueSchema, trainerTemplateNameSchema } from './trainer-template';

/**
 * Training jobs as data: a job names a trainer template of its fleet's layout and fills its typed parameters;
 * the scheduler runs it in a free training slot, preempts it when a promotion needs the GPU and resumes it
 * from its last committed checkpoint (docs/architecture.md §3.6).
 */

export const TRAINING_JOB_STATES = ['queued', 'running', 'preempted', 'succeeded', 'failed', 'cancelled'] as const;
export const trainingJobStateSchema = z.enum(TRAINING_JOB_STATES);
export type TrainingJobState = z.infer<typeof trainingJobStateSchema>;
/** States a job never leaves. */
export const TERMINAL_TRAINING_JOB_STATES = ['succeeded', 'failed', 'cancelled'] as const satisfies TrainingJobState[];
/** States of a job waiting for a slot: the queue the scheduler picks from. */
export const WAITING_TRAINING_JOB_STATES = ['queued', 'preempted'] as const satisfies TrainingJobState[];

/** The name the trained LoRA adapter is published under: a model name clients may send, so no spaces or slashes. */
export const adapterNameSchema = z
  .string()
  .regex(
    /^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$/,
    'must be letters, digits, ".", "_" or "-", starting with a letter or digit (1-128)',
  );

/** What a caller submits: everything else about a job is the scheduler's. */
export const trainingJobSpecSchema = z.strictObject({
  template: trainerTemplateNameSchema,
  baseModel: z.string().min(1).max(256),
  adapterName: adapterNameSchema,
  /** Where the trainer reads its data (a path, a URL, a hub id): handed to the trainer, never opened by Haru. */
  dataset: z.string().min(1).max(2048),
  steps: z.int().min(1).max(100_000_000),
  params: z.record(trainerParamNameSchema, trainerParamValueSchema).default({}),
  /** Higher runs first; equal priorities run oldest first. */
  priority: z.int().min(-1000).max(1000).default(0),
  /** Whether the adapter is published to the fleet's inference servers once the job succeeds. */
  publishOnSuccess: z.boolean().default(false),
});
export type TrainingJobSpec = z.infer<typeof trainingJobSpecSchema>;
export type TrainingJobSpecInput = z.input<typeof trainingJobSpecSchema>;

/** The last checkpoint a run committed: where it resumes from after a preemption. */
export const trainingCheckpointSchema = z.object({
  step: z.int().min(0),
  path: z.string().min(1).max(4096),
  /** The run generation that wrote it. */
  generation: z.int().min(1),
});
export type TrainingCheckpoint = z.infer<typeof trainingCheckpointSchema>;

/**
 * A job as stored. `runGeneration` counts the runs started (0 while never started); each start increments it
 * and only the current generation's trainer may commit a checkpoint or finish the run (fencing). `domainId` and
 * `gpuIndex` name the slot of the latest run (null before the first): a job holds it only while running, and a
 * cancelled job's scheduler reads there which trainer to stop. `preemptedAtStep` is set while preempted (the
 * step it resumes from).
 */
export const trainingJobSchema = trainingJobSpecSchema.extend({
  id: z.uuid(),
  fleetId: z.uuid(),
  state: trainingJobStateSchema,
  runGeneration: z.int().min(0),
  domainId: z.uuid().nullable(),
  gpuIndex: z.int().min(0).nullable(),
  preemptedAtStep: z.int().min(0).nullable(),
  checkpoint: trainingCheckpointSchema.nullable(),
  /** Why it failed or was cancelled; null otherwise. */
  reason: z.string().nullable(),
  requestedBy: z.string(),
  createdAt: isoDateSchema,
  updatedAt: isoDateSchema,
  startedAt: isoDateSchema.nullable(),
  finishedAt: isoDateSchema.nullable(),
});
export type TrainingJob = z.infer<typeof trainingJobSchema>;

/** What can happen to a job: the input of `nextJobState` (core/training-job.ts). */
export const trainingJobEventSchema = z.discriminatedUnion('type', [
  /** The scheduler starts a run in a slot: a new generation. */
  z.strictObject({ type: z.literal('start'), domainId: z.uuid(), gpuIndex: z.int().min(0).max(63) }),
  /** The run of `generation` committed a checkpoint at `step`. */
  z.strictObject({
    type: z.literal('checkpointCommitted'),
    generation: z.int().min(1),
    step: z.int().min(0),
    path: z.string().min(1).max(4096),
  }),
  /** The run of `generation` was stopped to free its GPU (a promotion); the job waits for a slot again. */
  z.strictObject({ type: z.literal('preempt'), generation: z.int().min(1) }),
  /** The run of `generation` finished its steps. */
  z.strictObject({ type: z.literal('succeed'), generation: z.int().min(1) }),
  /** The job cannot go on: a run of `generation` failed, or (without one) a waiting job cannot be run. */
  z.strictObject({ type: z.literal('fail'), generation: z.int().min(1).optional(), reason: z.string().min(1) }),
  /** A caller withdrew the job; a running trainer is then stopped by the scheduler. */
  z.strictObject({ type: z.literal('cancel'), reason: z.string().min(1).optional() }),
]);
export type TrainingJobEvent = z.infer<typeof trainingJobEventSchema>;
export type TrainingJobEventType = TrainingJobEvent['type'];

/** Why `nextJobState` refused an event. */
export const TRAINING_JOB_REFUSALS = ['illegal_transition', 'stale_generation', 'invalid_checkpoint'] as const;
export type TrainingJobRefusalCode = (typeof TRAINING_JOB_REFUSALS)[number];

/**
 * The job's state machine as data (the edges `nextJobState` may take). A committed checkpoint keeps a running
 * job running; it is not an edge.
 */
export const TRAINING_JOB_TRANSITIONS: TransitionTable<TrainingJobState> = {
  queued: ['running', 'failed', 'cancelled'],
  running: ['preempted', 'succeeded', 'failed', 'cancelled'],
  preempted: ['running', 'failed', 'cancelled'],
  succeeded: [],
  failed: [],
  cancelled: [],
};

/** What a history line records: the submission, or the type of the event applied. */
export const TRAINING_JOB_HISTORY_TYPES = [
  'submitted',
  'start',
  'checkpointCommitted',
  'preempt',
  'succeed',
  'fail',
  'cancel',
] as const satisfies readonly ('submitted' | TrainingJobEventType)[];

/** One line of a job's history (table `training_job_events`): its submission or an event the store applied. */
export const trainingJobHistoryEntrySchema = z.object({
  /** Monotonic cursor (bigserial as a number). */
  id: z.number().int(),
  jobId: z.uuid(),
  type: z.enum(TRAINING_JOB_HISTORY_TYPES),
  fromState: trainingJobStateSchema.nullable(),
  toState: trainingJobStateSchema,
  /** The job's run generation after the event. */
  runGeneration: z.int().min(0),
  data: z.record(z.string(), z.unknown()),
  createdAt: isoDateSchema,
});
export type TrainingJobHistoryEntry = z.infer<typeof trainingJobHistoryEntrySchema>;
