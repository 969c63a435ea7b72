import { and, asc, eq, gt, inArray, sql } from 'drizzle-orm';
import { checkJobAgainstTemplates } from '../../core/training-job-params';
import { nextJobState } from '../../core/training-job';
import type { InputProblem } from '../../schemas/issues';
import { inputProblems } from '../../schemas/issues';
import { type TrainerTemplate, trainerTemplateSchema } from '../../schemas/trainer-template';
import {
  TERMINAL_TRAINING_JOB_STATES,
  type TrainingJob,
  type TrainingJobEvent,
  trainingJobEventSchema,
  type TrainingJobHistoryEntry,
  type TrainingJobRefusalCode,
  trainingJobSpecSchema,
  type TrainingJobState,
} from '../../schemas/training-job';
import { fleets, trainingJobEvents, trainingJobs } from '../schema';
import { StoreError } from '../store-error';
import { isUuid, type RepoDeps, timestampParam } from './support';
import { machineColumns, toTrainingJob, toTrainingJobHistoryEntry } from './training-job-rows';

export interface SubmitTrainingJobInput {
  fleetId: string;
  /** The job as the caller sent it (parsed here: trainingJobSpecSchema). */
  spec: unknown;
  requestedBy: string;
}

export type SubmitTrainingJobResult =
  | { outcome: 'submitted'; job: TrainingJob }
  /** The spec is malformed or does not fit the template; each problem at its JSON path. Nothing was written. */
  | { outcome: 'invalid'; problems: InputProblem[] };

export type TrainingJobTransitionResult =
  | { outcome: 'applied'; job: TrainingJob; entry: TrainingJobHistoryEntry }
  /** The state machine refused the event (core/training-job.ts); `job` is the job as it stands, unchanged. */
  | { outcome: 'refused'; code: TrainingJobRefusalCode; reason: string; job: TrainingJob };

const MAX_LIST = 1000;
/** Templates are stored as applied (parsed, defaults filled); read back through the same schema. */
const trainerTemplatesSchema = trainerTemplateSchema.array();
const terminal: readonly TrainingJobState[] = TERMINAL_TRAINING_JOB_STATES;

/** What a history line keeps of an event: its fields but the type, which has a column. */
function eventData(event: TrainingJobEvent, before: TrainingJob): Record<string, unknown> {
  const { type: _type, ...fields } = event;
  // A cancelled run's trainer is still on its GPU until the scheduler stops it: say where.
  if (event.type === 'cancel' && before.state === 'running') {
    return { ...fields, domainId: before.domainId, gpuIndex: before.gpuIndex };
  }
  return fields;
}

export type TrainingJobRepo = ReturnType<typeof createTrainingJobRepo>;

/**
 * Training jobs and their history. Every change goes through the state machine of core/training-job.ts inside
 * one short transaction that holds the job's row lock (SELECT … FOR UPDATE), so concurrent events on one job
 * apply one after the other, each to the state the previous left; the history line is written in the same
 * transaction. No network call runs inside it.
 */
export function createTrainingJobRepo({ db, now }: RepoDeps) {
  const get = async (jobId: string): Promise<TrainingJob | null> => {
    if (!isUuid(jobId)) return null;
    const [row] = await db.select().from(trainingJobs).where(eq(trainingJobs.id, jobId));
    return row ? toTrainingJob(row) : null;
  };

  /**
   * Applies `event` to the job under its row lock, or returns the state machine's refusal. A start makes a
   * new run generation (returned in the job). StoreError `not_found` when the job does not exist.
   */
  const transition = async (jobId: string, input: TrainingJobEvent): Promise<TrainingJobTransitionResult> => {
    const event = trainingJobEventSchema.parse(input);
    if (!isUuid(jobId)) throw new StoreError('not_found', `training job ${jobId} does not exist`);
    return db.transaction(async (tx) => {
      const [row] = await tx.select().from(trainingJobs).where(eq(trainingJobs.id, jobId)).for('update');
      if (!row) throw new StoreError('not_found', `training job ${jobId} does not exist`);
      const before = toTrainingJob(row);
      const next = nextJobState(before, event);
      if (!next.ok) return { outcome: 'refused' as const, code: next.code, reason: next.reason, job: before };
      const at = now();
      const [updated] = await tx
        .update(trainingJobs)
        .set({
          ...machineColumns(next.job),
          updatedAt: at,
          ...(event.type === 'start' && !row.startedAt ? { startedAt: at } : {}),
          ...(terminal.includes(next.job.state) ? { finishedAt: at } : {}),
        })
        .where(eq(trainingJobs.id, jobId))
        .returning();
      const [entry] = await tx
        .insert(trainingJobEvents)
        .values({
          jobId,
          type: event.type,
          fromState: before.state,
          toState: next.job.state,
          runGeneration: next.job.runGeneration,
          data: eventData(event, before),
          createdAt: at,
        })
        .returning();
      return { outcome: 'applied' as const, job: toTrainingJob(updated!), entry: toTrainingJobHistoryEntry(entry!) };
    });
  };

  return {
    get,

    /**
     * Queues a job after checking it against the template it names, as the fleet's last applied layout declares
     * it (params resolved with their defaults, which the job keeps). StoreError `not_found` (fleet) when the
     * fleet does not exist.
     */
    async submit(input: SubmitTrainingJobInput): Promise<SubmitTrainingJobResult> {
      const parsed = trainingJobSpecSchema.safeParse(input.spec);
      if (!parsed.success) return { outcome: 'invalid', problems: inputProblems(parsed.error) };
      const missingFleet = new StoreError('not_found', `fleet ${input.fleetId} does not exist`, 'fleet');
      if (!isUuid(input.fleetId)) throw missingFleet;
      return db.transaction(async (tx) => {
        // FOR SHARE: a layout apply that changes the templates waits for this job, or this job for it.
        const [fleet] = await tx
          .select({ templates: fleets.trainingTemplates })
          .from(fleets)
          .where(eq(fleets.id, input.fleetId))
          .for('share');
        if (!fleet) throw missingFleet;
        const checked = checkJobAgainstTemplates(parsed.data, trainerTemplatesSchema.parse(fleet.templates));
        if (!checked.ok) return { outcome: 'invalid' as const, problems: checked.problems };
        const at = now();
        const [row] = await tx
          .insert(trainingJobs)
          .values({
            ...checked.spec,
            fleetId: input.fleetId,
            requestedBy: input.requestedBy,
            createdAt: at,
            updatedAt: at,
          })
          .returning();
        await tx.insert(trainingJobEvents).values({
          jobId: row!.id,
          type: 'submitted',
          fromState: null,
          toState: 'queued',
          runGeneration: 0,
          data: { requestedBy: input.requestedBy },
          createdAt: at,
        });
        return { outcome: 'submitted' as const, job: toTrainingJob(row!) };
      });
    },

    /** The trainer templates of a fleet's last applied layout; null when the fleet does not exist. */
    async templates(fleetId: string): Promise<TrainerTemplate[] | null> {
      if (!isUuid(fleetId)) return null;
      const [fleet] = await db
        .select({ templates: fleets.trainingTemplates })
        .from(fleets)
        .where(eq(fleets.id, fleetId));
      return fleet ? trainerTemplatesSchema.parse(fleet.templates) : null;
    },

    /**
     * A fleet's jobs, oldest first (ties by id), optionally only those in `states`; at most `limit` (default
     * 100, at most 1000) after the job `after` (an id from a previous page).
     */
    async list(
      fleetId: string,
      opts: { states?: readonly TrainingJobState[]; limit?: number; after?: TrainingJob } = {},
    ): Promise<TrainingJob[]> {
      if (!isUuid(fleetId)) return [];
      const filters = [eq(trainingJobs.fleetId, fleetId)];
      if (opts.states) filters.push(inArray(trainingJobs.state, [...opts.states]));
      if (opts.after) {
        const { createdAt, id } = opts.after;
        // Keyset paging: rows strictly after the last one seen, in the listing's own order.
        filters.push(
          sql`(${trainingJobs.createdAt}, ${trainingJobs.id}) > (${timestampParam(new Date(createdAt))}, ${id}::uuid)`,
        );
      }
      const rows = await db
        .select()
        .from(trainingJobs)
        .where(and(...filters))
        .orderBy(asc(trainingJobs.createdAt), asc(trainingJobs.id))
        .limit(Math.min(opts.limit ?? 100, MAX_LIST));
      return rows.map(toTrainingJob);
    },

    /** A job's history, oldest first, after the cursor `after` (default 0). */
    async history(jobId: string, opts: { after?: number; limit?: number } = {}): Promise<TrainingJobHistoryEntry[]> {
      if (!isUuid(jobId)) return [];
      const rows = await db
        .select()
        .from(trainingJobEvents)
        .where(and(eq(trainingJobEvents.jobId, jobId), gt(trainingJobEvents.id, opts.after ?? 0)))
        .orderBy(asc(trainingJobEvents.id))
        .limit(Math.min(opts.limit ?? 100, MAX_LIST));
      return rows.map(toTrainingJobHistoryEntry);
    },

    transition,

    /**
     * The run of `generation` committed its checkpoint at `step` in `path`: refused (`stale_generation`) when a
     * newer run has started since, so a trainer that was preempted or lost can never overwrite the progress of
     * the run that replaced it.
     */
    commitCheckpoint: (jobId: string, generation: number, step: number, path: string) =>
      transition(jobId, { type: 'checkpointCommitted', generation, step, path }),
  };
}
