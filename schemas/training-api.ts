import { z } from 'zod';
import { trainingJobHistoryEntrySchema, trainingJobSchema, trainingJobStateSchema } from './training-job';

/**
 * The bodies and queries of the training job routes (`/v1/fleets/:fleet/training/jobs…`, docs/architecture.md
 * §3.6 and §5.1). A submission's body is the job's spec itself (`trainingJobSpecSchema`); the job answers are the
 * stored job (`trainingJobSchema`).
 */

/** `?state=queued,preempted`: one state or several, comma-separated. */
const stateListSchema = z
  .string()
  .transform((value) =>
    value
      .split(',')
      .map((s) => s.trim())
      .filter(Boolean),
  )
  .pipe(z.array(trainingJobStateSchema).min(1, 'name at least one state'));

/** Query of `GET …/training/jobs`: the fleet's jobs oldest first, by state, in pages after a job id. */
export const trainingJobsQuerySchema = z.strictObject({
  state: stateListSchema.optional(),
  limit: z.coerce.number().int().min(1).max(1_000).default(100),
  /** The last job of the previous page (its `nextAfter`). */
  after: z.uuid().optional(),
});
export type TrainingJobsQuery = z.infer<typeof trainingJobsQuerySchema>;

/** The answer of `GET …/training/jobs`; `nextAfter` is the id to page on from, null on the last page. */
export const trainingJobListResponseSchema = z.object({
  jobs: z.array(trainingJobSchema),
  nextAfter: z.uuid().nullable(),
});
export type TrainingJobListResponse = z.infer<typeof trainingJobListResponseSchema>;

/** Query of `GET …/training/jobs/:job`: which page of its history comes with it. */
export const trainingJobHistoryQuerySchema = z.strictObject({
  /** History lines after this cursor (a previous answer's `nextCursor`). */
  after: z.coerce.number().int().min(0).optional(),
  limit: z.coerce.number().int().min(1).max(1_000).default(1_000),
});

/** One job with its history, oldest line first; `nextCursor` pages on through a longer one, null at its end. */
export const trainingJobDetailSchema = trainingJobSchema.extend({
  history: z.array(trainingJobHistoryEntrySchema),
  nextCursor: z.number().int().nullable(),
});
export type TrainingJobDetail = z.infer<typeof trainingJobDetailSchema>;

/** Body of `POST …/training/jobs/:job/cancel`. */
export const trainingJobCancelRequestSchema = z.strictObject({ reason: z.string().min(1).max(500).optional() });
export type TrainingJobCancelRequest = z.infer<typeof trainingJobCancelRequestSchema>;
