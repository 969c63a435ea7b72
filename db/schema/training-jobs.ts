import { sql } from 'drizzle-orm';
import { bigserial, boolean, check, index, integer, jsonb, pgTable, text, timestamp, uuid } from 'drizzle-orm/pg-core';
import type { TrainerParamValue } from '../../schemas/trainer-template';
import { trainingJobStateEnum } from './enums';
import { fleets } from './fleets';

/**
 * One training job (schemas/training-job.ts): what was asked (template, base model, adapter, dataset, steps,
 * params with defaults filled in, priority) and where it stands. `run_generation` counts the runs started;
 * only the current one's trainer may commit a checkpoint (the fencing token). `domain_id` carries no foreign
 * key on purpose, as on operations: a job's history outlives a pruned domain.
 */
export const trainingJobs = pgTable(
  'training_jobs',
  {
    id: uuid('id').primaryKey().defaultRandom(),
    fleetId: uuid('fleet_id')
      .notNull()
      .references(() => fleets.id, { onDelete: 'cascade' }),
    template: text('template').notNull(),
    baseModel: text('base_model').notNull(),
    adapterName: text('adapter_name').notNull(),
    dataset: text('dataset').notNull(),
    steps: integer('steps').notNull(),
    params: jsonb('params').$type<Record<string, TrainerParamValue>>().notNull(),
    priority: integer('priority').notNull().default(0),
    publishOnSuccess: boolean('publish_on_success').notNull().default(false),
    state: trainingJobStateEnum('state').notNull().default('queued'),
    runGeneration: integer('run_generation').notNull().default(0),
    domainId: uuid('domain_id'),
    gpuIndex: integer('gpu_index'),
    preemptedAtStep: integer('preempted_at_step'),
    checkpointStep: integer('checkpoint_step'),
    checkpointPath: text('checkpoint_path'),
    checkpointGeneration: integer('checkpoint_generation'),
    reason: text('reason'),
    requestedBy: text('requested_by').notNull(),
    createdAt: timestamp('created_at', { withTimezone: true }).notNull().defaultNow(),
    updatedAt: timestamp('updated_at', { withTimezone: true }).notNull().defaultNow(),
    startedAt: timestamp('started_at', { withTimezone: true }),
    finishedAt: timestamp('finished_at', { withTimezone: true }),
  },
  (t) => [
    // What the state machine guarantees, held by the database too, so no other writer can break it.
    check(
      'training_jobs_running_has_slot',
      sql`${t.state} <> 'running' or (${t.domainId} is not null and ${t.gpuIndex} is not null)`,
    ),
    check('training_jobs_preempted_has_step', sql`(${t.state} = 'preempted') = (${t.preemptedAtStep} is not null)`),
    check(
      'training_jobs_checkpoint_whole',
      sql`(${t.checkpointStep} is null) = (${t.checkpointPath} is null) and (${t.checkpointStep} is null) = (${t.checkpointGeneration} is null)`,
    ),
    check(
      'training_jobs_generation_fenced',
      sql`${t.checkpointGeneration} is null or ${t.checkpointGeneration} <= ${t.runGeneration}`,
    ),
    // The scheduler's pick: a fleet's waiting jobs, highest priority first, then oldest.
    index('training_jobs_fleet_queue_idx').on(t.fleetId, t.state, t.priority.desc(), t.createdAt),
    index('training_jobs_fleet_created_idx').on(t.fleetId, t.createdAt),
  ],
);
export type TrainingJobRow = typeof trainingJobs.$inferSelect;

/**
 * A job's own append-only history: one row per submission and per applied event (a transition or a committed
 * checkpoint), with the run generation it came from. `id` is the cursor, as in `events`.
 */
export const trainingJobEvents = pgTable(
  'training_job_events',
  {
    id: bigserial('id', { mode: 'number' }).primaryKey(),
    jobId: uuid('job_id')
      .notNull()
      .references(() => trainingJobs.id, { onDelete: 'cascade' }),
    /** `submitted`, or the event's type (`start`, `checkpointCommitted`, `preempt`, `succeed`, `fail`, `cancel`). */
    type: text('type').notNull(),
    fromState: trainingJobStateEnum('from_state'),
    toState: trainingJobStateEnum('to_state').notNull(),
    runGeneration: integer('run_generation').notNull(),
    data: jsonb('data')
      .$type<Record<string, unknown>>()
      .notNull()
      .default(sql`'{}'::jsonb`),
    createdAt: timestamp('created_at', { withTimezone: true }).notNull().defaultNow(),
  },
  (t) => [index('training_job_events_job_id_idx').on(t.jobId, t.id)],
);
export type TrainingJobEventRow = typeof trainingJobEvents.$inferSelect;
