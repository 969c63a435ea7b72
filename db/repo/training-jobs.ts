import { and, asc, eq, getTableColumns, gt, inArray, sql } from 'drizzle-orm';
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
import { isUuid, type RepoDeps, rowsOf, timestampParam } from './support';
import { insertJob, moveJob, writtenRow } from './training-job-statements';
import { toTrainingJob, toTrainingJobHistoryEntry } from './training-job-rows';

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
/** Writes that found their read outdated are decided again; each lost race means another writer won. */
const WRITE_ATTEMPTS = 50;
const jobNotFound = (jobId: string) => new StoreError('not_found', `training job ${jobId} does not exist`);
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
 * Training jobs and their history. Every change is decided by the state machine of core/training-job.ts on the
 * job as read, then written in one statement with its history line, guarded by the row version read: when
 * another event changed the job in between, nothing is written and the event is decided again on what that
 * one left. So concurrent events on one job apply one after the other, and no transaction is held open
 * (docs/architecture.md §3.6).
 */
export function createTrainingJobRepo({ db, now }: RepoDeps) {
  const get = async (jobId: string): Promise<TrainingJob | null> => {
    if (!isUuid(jobId)) return null;
    const [row] = await db.select().from(trainingJobs).where(eq(trainingJobs.id, jobId));
    return row ? toTrainingJob(row) : null;
  };

  /** A fleet's templates as stored (what a submission's guard compares) and as parsed; null without the fleet. */
  const readTemplates = async (fleetId: string) => {
    const [fleet] = await db.select({ stored: fleets.trainingTemplates }).from(fleets).where(eq(fleets.id, fleetId));
    return fleet ? { stored: fleet.stored, parsed: trainerTemplatesSchema.parse(fleet.stored) } : null;
  };

  /** The trainer templates of a fleet's last applied layout; null when the fleet does not exist. */
  const templates = async (fleetId: string): Promise<TrainerTemplate[] | null> =>
    isUuid(fleetId) ? ((await readTemplates(fleetId))?.parsed ?? null) : null;

  /**
   * Applies `event` to the job, or returns the state machine's refusal. A start makes a new run generation
   * (returned in the job). StoreError `not_found` when the job does not exist.
   */
  const transition = async (jobId: string, input: TrainingJobEvent): Promise<TrainingJobTransitionResult> => {
    const event = trainingJobEventSchema.parse(input);
    if (!isUuid(jobId)) throw jobNotFound(jobId);
    for (let attempt = 0; attempt < WRITE_ATTEMPTS; attempt += 1) {
      const [read] = await db
        .select({ ...getTableColumns(trainingJobs), version: sql<string>`${trainingJobs}.xmin::text` })
        .from(trainingJobs)
        .where(eq(trainingJobs.id, jobId));
      if (!read) throw jobNotFound(jobId);
      const { version, ...row } = read;
      const before = toTrainingJob(row);
      const next = nextJobState(before, event);
      if (!next.ok) return { outcome: 'refused', code: next.code, reason: next.reason, job: before };
      const at = now();
      const statement = moveJob({
        before,
        version,
        after: next.job,
        type: event.type,
        data: eventData(event, before),
        at,
        startedAt: row.startedAt ?? (event.type === 'start' ? at : null),
        finishedAt: terminal.includes(next.job.state) ? at : null,
      });
      const [written] = rowsOf<{ job: unknown; entry: unknown }>(await db.execute(statement)).map(writtenRow);
      // Nothing written: another event changed the job since it was read. Decide again on what it left.
      if (!written) continue;
      return {
        outcome: 'applied',
        job: toTrainingJob(written.job),
        entry: toTrainingJobHistoryEntry(written.entry),
      };
    }
    throw new StoreError('unavailable', `training job ${jobId} kept changing under ${WRITE_ATTEMPTS} attempts`);
  };

  return {
    get,

    /**
     * Queues a job after checking it against the template it names, as the fleet's last applied layout declares
     * it (params resolved with their defaults, which the job keeps); written only while those templates are
     * still the fleet's. StoreError `not_found` (fleet) when the fleet does not exist.
     */
    async submit(input: SubmitTrainingJobInput): Promise<SubmitTrainingJobResult> {
      const parsed = trainingJobSpecSchema.safeParse(input.spec);
      if (!parsed.success) return { outcome: 'invalid', problems: inputProblems(parsed.error) };
      const missingFleet = new StoreError('not_found', `fleet ${input.fleetId} does not exist`, 'fleet');
      if (!isUuid(input.fleetId)) throw missingFleet;
      for (let attempt = 0; attempt < WRITE_ATTEMPTS; attempt += 1) {
        const declared = await readTemplates(input.fleetId);
        if (!declared) throw missingFleet;
        const checked = checkJobAgainstTemplates(parsed.data, declared.parsed);
        if (!checked.ok) return { outcome: 'invalid', problems: checked.problems };
        const statement = insertJob({ ...input, spec: checked.spec, storedTemplates: declared.stored, at: now() });
        const [written] = rowsOf<{ job: unknown; entry: unknown }>(await db.execute(statement)).map(writtenRow);
        // Nothing written: a layout apply changed the templates (or removed the fleet) since they were read.
        if (written) return { outcome: 'submitted', job: toTrainingJob(written.job) };
      }
      throw new StoreError('unavailable', `fleet ${input.fleetId}'s templates kept changing under the submission`);
    },

    templates,

    /**
     * A fleet's jobs, oldest first (ties by id), optionally only those in `states`; at most `limit` (default
     * 100, at most 1000) after the job `after` (an id from a previous page).
     */
    async list(
      fleetId: string,
      opts: {
        states?: readonly TrainingJobState[];
        limit?: number;
        after?: Pick<TrainingJob, 'id' | 'createdAt'>;
      } = {},
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
