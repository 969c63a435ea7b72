import { type Command, InvalidArgumentError, Option } from 'commander';
import { fleetSnapshotSchema } from '../../schemas/entities';
import {
  type TrainingJobDetail,
  trainingJobDetailSchema,
  trainingJobListResponseSchema,
} from '../../schemas/training-api';
import { TRAINING_JOB_STATES, trainingJobSchema } from '../../schemas/training-job';
import type { ApiClient } from '../api-client';
import { integerArg } from '../arguments';
import { apiClientFor } from '../connection';
import { isData, isWide, type OutputOptions, renderData } from '../output';
import { type DomainName, formatJobDetail, formatJobHistory, formatJobs, jobLine } from '../training-format';
import { paramsOf } from '../training-params';

const out = (text: string): void => {
  process.stdout.write(`${text}\n`);
};
const jobsPath = (fleet: string) => `/v1/fleets/${encodeURIComponent(fleet)}/training/jobs`;
const jobPath = (fleet: string, job: string) => `${jobsPath(fleet)}/${encodeURIComponent(job)}`;

/** The fleet's domains by id, for tables that name a run's slot (`west/gpu0`). */
async function domainNames(api: ApiClient, fleet: string): Promise<DomainName> {
  const snapshot = await api.get(`/v1/fleets/${encodeURIComponent(fleet)}`, fleetSnapshotSchema);
  return (id) => snapshot.domains.find((d) => d.id === id)?.slug ?? id;
}

/** The job with every line of its history, page after page. */
async function wholeJob(api: ApiClient, fleet: string, job: string): Promise<TrainingJobDetail> {
  const first = await api.get(jobPath(fleet, job), trainingJobDetailSchema);
  const history = [...first.history];
  for (let cursor = first.nextCursor; cursor !== null;) {
    const page = await api.get(`${jobPath(fleet, job)}?after=${cursor}`, trainingJobDetailSchema);
    history.push(...page.history);
    cursor = page.nextCursor;
  }
  return { ...first, history, nextCursor: null };
}

/** `--state queued,running`: checked here, so a typo is commander's one line (exit 2) before any call. */
function statesArg(value: string): string {
  const unknown = value.split(',').filter((s) => !(TRAINING_JOB_STATES as readonly string[]).includes(s.trim()));
  if (unknown.length) throw new InvalidArgumentError(`states are ${TRAINING_JOB_STATES.join(', ')}`);
  return value;
}

interface SubmitOptions extends OutputOptions {
  template: string;
  baseModel: string;
  adapter: string;
  dataset: string;
  steps: number;
  param: string[];
  priority?: number;
  publish?: boolean;
}

/**
 * `haru training submit|list|show|cancel|logs`: training jobs of a fleet through the Haru API
 * (`/v1/fleets/:fleet/training/jobs`, docs/architecture.md §3.6); a client like `haru fleet` (cli/connection.ts).
 */
export function register(program: Command): void {
  const training = program
    .command('training')
    .description("submit, list, show and cancel a fleet's training jobs through the Haru API");

  training
    .command('submit <fleet>')
    .description("queue a job that runs a trainer template of the fleet's layout with the given parameters")
    .requiredOption('--template <name>', 'the trainer template (the layout declares them)')
    .requiredOption('--base-model <model>', 'the base model to train (one the template trains)')
    .requiredOption('--adapter <name>', 'the name the trained adapter is published under')
    .requiredOption('--dataset <ref>', 'where the trainer reads its data (a path, URL or hub id; Haru never opens it)')
    .requiredOption('--steps <n>', 'training steps', integerArg(1))
    .option(
      '--param <name=value>',
      'a template parameter, repeatable (true/false, a number, "quoted" for a string that looks like one, else text)',
      (value: string, all: string[]) => [...all, value],
      [] as string[],
    )
    .option('--priority <n>', 'higher runs first (-1000 to 1000, default 0)', integerArg(-1000, 1000))
    .option('--publish', 'publish the adapter to the fleet once the job succeeds')
    .option('--json', 'print JSON')
    .action(async (fleet: string, opts: SubmitOptions, cmd: Command) => {
      const body = {
        template: opts.template,
        baseModel: opts.baseModel,
        adapterName: opts.adapter,
        dataset: opts.dataset,
        steps: opts.steps,
        params: paramsOf(opts.param),
        ...(opts.priority !== undefined ? { priority: opts.priority } : {}),
        ...(opts.publish ? { publishOnSuccess: true } : {}),
      };
      const { body: job } = await apiClientFor(cmd).post(jobsPath(fleet), body, trainingJobSchema);
      out(isData(opts) ? renderData(job, opts) : `submitted ${jobLine(job)}`);
    });

  training
    .command('list <fleet>')
    .description("list the fleet's training jobs, oldest first, with their age, state, progress and slot")
    .option('--state <states>', 'only jobs in these states (comma-separated)', statesArg)
    .addOption(new Option('--limit <n>', 'at most this many').argParser(integerArg(1, 1000)).default(100))
    .option('--json', 'print JSON')
    .action(async (fleet: string, opts: OutputOptions & { state?: string; limit: number }, cmd: Command) => {
      const api = apiClientFor(cmd);
      const query = new URLSearchParams({ limit: String(opts.limit), ...(opts.state ? { state: opts.state } : {}) });
      const list = api.get(`${jobsPath(fleet)}?${query}`, trainingJobListResponseSchema);
      if (isData(opts)) return out(renderData((await list).jobs, opts));
      // Independent reads, at the same time: one round trip instead of two.
      const [{ jobs }, domainName] = await Promise.all([list, domainNames(api, fleet)]);
      out(formatJobs(jobs, { wide: isWide(opts), now: new Date(), domainName }));
    });

  training
    .command('show <fleet> <job>')
    .description('show one job: what it trains, its state, run, checkpoint and parameters, then its history')
    .option('--json', 'print JSON (the job with its history)')
    .action(async (fleet: string, job: string, opts: OutputOptions, cmd: Command) => {
      const api = apiClientFor(cmd);
      const detail = api.get(jobPath(fleet, job), trainingJobDetailSchema);
      if (isData(opts)) return out(renderData(await detail, opts));
      const [shown, domainName] = await Promise.all([detail, domainNames(api, fleet)]);
      out(formatJobDetail(shown, { wide: isWide(opts), now: new Date(), domainName }));
    });

  training
    .command('cancel <fleet> <job>')
    .description('cancel a queued, running or preempted job (a finished one is refused)')
    .option('--reason <text>', 'why (recorded in the job and its history)')
    .option('--json', 'print JSON')
    .action(async (fleet: string, job: string, opts: OutputOptions & { reason?: string }, cmd: Command) => {
      const { body } = await apiClientFor(cmd).post(
        `${jobPath(fleet, job)}/cancel`,
        opts.reason ? { reason: opts.reason } : {},
        trainingJobSchema,
      );
      out(isData(opts) ? renderData(body, opts) : `cancelled ${jobLine(body)}`);
    });

  training
    .command('logs <fleet> <job>')
    .description(
      "print the job's history, oldest first: its submission, each state transition, checkpoint and the end, with times and reasons (Haru keeps the job's events, not the trainer's output)",
    )
    .option('--json', 'print JSON (the history lines)')
    .action(async (fleet: string, job: string, opts: OutputOptions, cmd: Command) => {
      const api = apiClientFor(cmd);
      if (isData(opts)) return out(renderData((await wholeJob(api, fleet, job)).history, opts));
      const [{ history }, domainName] = await Promise.all([wholeJob(api, fleet, job), domainNames(api, fleet)]);
      out(formatJobHistory(history, { wide: isWide(opts), now: new Date(), domainName }));
    });
}
