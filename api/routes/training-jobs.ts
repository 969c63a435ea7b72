import { Router } from 'express';
import type { FleetSnapshot } from '../../schemas/entities';
import { errorBodySchema, HaruError } from '../../schemas/errors';
import { type InputProblem, inputProblems } from '../../schemas/issues';
import {
  trainingJobCancelRequestSchema,
  trainingJobDetailSchema,
  trainingJobHistoryQuerySchema,
  trainingJobListResponseSchema,
  trainingJobsQuerySchema,
} from '../../schemas/training-api';
import { type TrainingJob, trainingJobSchema, trainingJobSpecSchema } from '../../schemas/training-job';
import { requestedBy } from '../auth/principal';
import type { RouteDoc } from '../route-doc';
import { storeDeadline } from '../timeout';
import { controlStoreTimeoutMs, loadFleet, param, parseWith, type RouteContext, UUID_RE } from './context';

const JOBS = '/v1/fleets/:fleet/training/jobs';
const JOB = `${JOBS}/:job`;

const error = (description: string) => ({ description, schema: errorBodySchema });
const common = {
  401: error('missing or invalid bearer token (`unauthorized`)'),
  503: error('`state_store_unavailable`'),
};
const jobNotFound = error('`fleet_not_found` or `training_job_not_found`');

/** The OpenAPI entries of the training job routes (api/openapi.ts). */
export const TRAINING_ROUTE_DOCS: RouteDoc[] = [
  {
    method: 'post',
    path: JOBS,
    summary:
      "Queue a training job: a trainer template of the fleet's layout, its typed parameters (checked against the template, defaults filled in), priority and publishOnSuccess",
    tag: 'training',
    scope: 'operate',
    body: trainingJobSpecSchema,
    responses: {
      202: { description: 'queued; the job as stored', schema: trainingJobSchema },
      400: error(
        'a malformed job or params that do not fit the template, every problem at its JSON path (`invalid_request`)',
      ),
      ...common,
      404: error('`fleet_not_found`'),
      413: error('body over 16 KiB (`payload_too_large`)'),
      422: error("no such trainer template in the fleet's last applied layout (`invalid_target`)"),
    },
  },
  {
    method: 'get',
    path: JOBS,
    summary: "The fleet's training jobs, oldest first, optionally by state (`state=queued,running`), in pages",
    tag: 'training',
    scope: 'read',
    query: trainingJobsQuerySchema,
    responses: {
      200: { description: 'jobs', schema: trainingJobListResponseSchema },
      400: error('`invalid_request`'),
      ...common,
      404: jobNotFound,
    },
  },
  {
    method: 'get',
    path: JOB,
    summary: 'One training job with its history: submission, state transitions and checkpoints, oldest first',
    tag: 'training',
    scope: 'read',
    query: trainingJobHistoryQuerySchema,
    responses: {
      200: { description: 'the job and a page of its history', schema: trainingJobDetailSchema },
      400: error('`invalid_request`'),
      ...common,
      404: jobNotFound,
    },
  },
  {
    method: 'post',
    path: `${JOB}/cancel`,
    summary: "Cancel a queued, running or preempted job (a running one's trainer is stopped by the scheduler)",
    tag: 'training',
    scope: 'operate',
    body: trainingJobCancelRequestSchema,
    responses: {
      200: { description: 'cancelled; the job as stored', schema: trainingJobSchema },
      400: error('`invalid_request`'),
      ...common,
      404: jobNotFound,
      409: error('the job already finished: succeeded, failed or cancelled (`training_job_conflict`)'),
    },
  },
];

/** 400 `invalid_request` naming every problem at its JSON path, one a line. */
const invalidJob = (problems: readonly InputProblem[]) =>
  new HaruError(
    'invalid_request',
    `invalid training job: ${problems.map((p) => `${p.path}: ${p.message}`).join('\n')}`,
  );

/**
 * The refusal of a submission the store checked against the fleet's templates (its shape was parsed before):
 * a template the layout does not declare is 422 `invalid_target`, as a promotion's target outside the fleet is;
 * a base model or params that do not fit the template are the body's fault, 400 `invalid_request`. The message
 * names every problem at its JSON path, one a line.
 */
export function submissionRefusal(problems: readonly InputProblem[]): HaruError {
  const isUnknownTemplate = problems.length === 1 && problems[0]!.path === '$.template';
  if (isUnknownTemplate) return new HaruError('invalid_target', problems[0]!.message);
  return invalidJob(problems);
}

/**
 * `POST /v1/fleets/:fleet/training/jobs` (submit), `GET …/training/jobs` (list), `GET …/jobs/:job` (with its
 * history) and `POST …/jobs/:job/cancel`. Every change goes through the store, which decides it with the job's
 * state machine (core/training-job.ts); the scheduler that runs jobs is not here.
 */
export function trainingJobRoutes(ctx: RouteContext): Router {
  const router = Router();
  const deadline = <T>(call: Promise<T>) => storeDeadline(call, controlStoreTimeoutMs(ctx.config));

  /** A job of this fleet by id: 404 `training_job_not_found` for any other (or another fleet's). */
  async function loadJob(fleet: FleetSnapshot, id: string): Promise<TrainingJob> {
    const job = UUID_RE.test(id) ? await deadline(ctx.store.trainingJobs.get(id)) : null;
    if (!job || job.fleetId !== fleet.id) {
      throw new HaruError('training_job_not_found', `training job ${id} not found in fleet ${fleet.slug}`);
    }
    return job;
  }

  router.post(JOBS, async (req, res) => {
    const parsed = trainingJobSpecSchema.safeParse(req.body ?? {});
    if (!parsed.success) throw invalidJob(inputProblems(parsed.error));
    const fleet = await loadFleet(ctx, param(req, 'fleet'));
    const by = requestedBy(req);
    const result = await deadline(
      ctx.store.trainingJobs.submit({ fleetId: fleet.id, spec: parsed.data, requestedBy: by }),
    );
    if (result.outcome === 'invalid') throw submissionRefusal(result.problems);
    const { job } = result;
    ctx.logger.info('training job submitted', { fleetId: fleet.id, jobId: job.id, template: job.template, by });
    res.status(202).json(job);
  });

  router.get(JOBS, async (req, res) => {
    const query = parseWith(trainingJobsQuerySchema, req.query, 'query');
    const fleet = await loadFleet(ctx, param(req, 'fleet'));
    const after = query.after ? await loadJob(fleet, query.after) : undefined;
    const jobs = await deadline(
      ctx.store.trainingJobs.list(fleet.id, { states: query.state, limit: query.limit, after }),
    );
    res.json({ jobs, nextAfter: jobs.length === query.limit ? jobs.at(-1)!.id : null });
  });

  router.get(JOB, async (req, res) => {
    const query = parseWith(trainingJobHistoryQuerySchema, req.query, 'query');
    const fleet = await loadFleet(ctx, param(req, 'fleet'));
    const job = await loadJob(fleet, param(req, 'job'));
    const history = await deadline(ctx.store.trainingJobs.history(job.id, query));
    res.json({ ...job, history, nextCursor: history.length === query.limit ? history.at(-1)!.id : null });
  });

  router.post(`${JOB}/cancel`, async (req, res) => {
    const body = parseWith(trainingJobCancelRequestSchema, req.body ?? {}, 'cancel request');
    const fleet = await loadFleet(ctx, param(req, 'fleet'));
    const job = await loadJob(fleet, param(req, 'job'));
    const reason = body.reason ?? 'cancelled through the API';
    const result = await deadline(ctx.store.trainingJobs.transition(job.id, { type: 'cancel', reason }));
    if (result.outcome === 'refused') {
      throw new HaruError('training_job_conflict', `training job ${job.id}: ${result.reason}`);
    }
    ctx.logger.info('training job cancelled', { fleetId: fleet.id, jobId: job.id, by: requestedBy(req) });
    res.json(result.job);
  });

  return router;
}
