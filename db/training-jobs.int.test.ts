import postgres from 'postgres';
import type { FleetLayoutInput } from '../schemas/layout';
import { type TrainerTemplateInput, trainerTemplateSchema } from '../schemas/trainer-template';
import { type TrainingJob, trainingJobSpecSchema } from '../schemas/training-job';
import type { HaruDatabase } from './client';
import { testLayout } from './fixtures';
import type { Store } from './store';
import { insertJob } from './repo/training-job-statements';
import { rowsOf } from './repo/support';
import { StoreError } from './store-error';
import { eventually } from '../test/support/eventually';
import { createPgliteTestDatabase, createTestDatabase, seedLayout } from './testing';

/** Training jobs in the store, on both backends: submit, the life of a job with fencing, and row-lock serialisation. */

interface Backend {
  database: HaruDatabase;
  store: Store;
  drop(): Promise<void>;
}

let clock = new Date('2030-01-01T00:00:00.000Z');
const now = () => clock;
const tick = (ms = 1_000) => (clock = new Date(clock.getTime() + ms));

const backends: [string, () => Promise<Backend>][] = [
  ['postgres', () => createTestDatabase({ now })],
  ['pglite', () => createPgliteTestDatabase({ now })],
];

const template = {
  name: 'lora-sft',
  command: ['python', 'examples/lora-trainer.py'],
  baseModels: ['qwen-7b'],
  params: {
    rank: { type: 'integer', min: 1, max: 256, default: 16 },
    learningRate: { type: 'number', min: 0, max: 1 },
  },
} satisfies TrainerTemplateInput;

/** The fixture layout with the trainer templates jobs are checked against. */
const layoutWithTemplates = (fleet: string, templates: TrainerTemplateInput[] = [template]): FleetLayoutInput => ({
  ...testLayout({ fleet }),
  training: { templates },
});

const spec = (overrides: Record<string, unknown> = {}) => ({
  template: 'lora-sft',
  baseModel: 'qwen-7b',
  adapterName: 'support-bot',
  dataset: 's3://datasets/support.jsonl',
  steps: 1000,
  params: { learningRate: 0.0001 },
  ...overrides,
});

describe.each(backends)('training jobs on %s', (_backend, open) => {
  let t: Backend;
  let fleetId: string;
  let domainId: string;
  beforeAll(async () => {
    t = await open();
    await seedLayout(t.store, layoutWithTemplates('trainers'));
    const snapshot = (await t.store.fleets.snapshot('trainers'))!;
    fleetId = snapshot.id;
    domainId = snapshot.domains.find((d) => d.slug === 'west')!.id;
  }, 60_000);
  afterAll(() => t?.drop());

  async function submit(overrides: Record<string, unknown> = {}): Promise<TrainingJob> {
    tick();
    const result = await t.store.trainingJobs.submit({
      fleetId,
      spec: spec(overrides),
      requestedBy: 'api:ci',
    });
    if (result.outcome !== 'submitted') throw new Error(`submit refused: ${JSON.stringify(result.problems)}`);
    return result.job;
  }

  async function applied(result: Promise<Awaited<ReturnType<Store['trainingJobs']['transition']>>>) {
    const r = await result;
    if (r.outcome !== 'applied') throw new Error(`refused: ${r.code}: ${r.reason}`);
    return r.job;
  }

  it('queues a submitted job with its params resolved, and records the submission', async () => {
    const job = await submit();
    expect(job).toMatchObject({
      fleetId,
      state: 'queued',
      runGeneration: 0,
      params: { learningRate: 0.0001, rank: 16 },
      priority: 0,
      publishOnSuccess: false,
      checkpoint: null,
      requestedBy: 'api:ci',
      createdAt: clock.toISOString(),
      startedAt: null,
    });
    expect(await t.store.trainingJobs.get(job.id)).toEqual(job);
    expect(await t.store.trainingJobs.history(job.id)).toEqual([
      expect.objectContaining({ type: 'submitted', fromState: null, toState: 'queued', runGeneration: 0 }),
    ]);
  });

  it('refuses a job that does not fit its template, writing nothing', async () => {
    const before = await t.store.trainingJobs.list(fleetId);
    const refused = await t.store.trainingJobs.submit({
      fleetId,
      spec: spec({ baseModel: 'llama-8b', params: { rank: 0 }, steps: 0 }),
      requestedBy: 'api:ci',
    });
    expect(refused).toEqual({ outcome: 'invalid', problems: [{ path: '$.steps', message: expect.any(String) }] });
    const unfit = await t.store.trainingJobs.submit({
      fleetId,
      spec: spec({ baseModel: 'llama-8b', params: { rank: 0 } }),
      requestedBy: 'api:ci',
    });
    expect(unfit).toEqual({
      outcome: 'invalid',
      problems: [
        { path: '$.baseModel', message: 'template "lora-sft" trains qwen-7b, not "llama-8b"' },
        { path: '$.params.rank', message: 'must be at least 1' },
      ],
    });
    expect(await t.store.trainingJobs.list(fleetId)).toEqual(before);
  });

  it('refuses a job for a fleet that does not exist', async () => {
    const submitTo = (id: string) => t.store.trainingJobs.submit({ fleetId: id, spec: spec(), requestedBy: 'api:ci' });
    await expect(submitTo('00000000-0000-4000-8000-000000000000')).rejects.toMatchObject({
      code: 'not_found',
      entity: 'fleet',
    });
    await expect(submitTo('nope')).rejects.toBeInstanceOf(StoreError);
  });

  it('checks a job against the templates of the fleet’s last applied layout', async () => {
    expect(await t.store.trainingJobs.templates(fleetId)).toEqual([trainerTemplateSchema.parse(template)]);
    const unknown = await t.store.trainingJobs.submit({
      fleetId,
      spec: spec({ template: 'dpo' }),
      requestedBy: 'api:ci',
    });
    expect(unknown).toEqual({
      outcome: 'invalid',
      problems: [{ path: '$.template', message: 'no trainer template "dpo" (the layout has: lora-sft)' }],
    });

    // A re-applied layout with another template replaces them; the same layout again changes nothing.
    const dpo = { name: 'dpo', command: ['python', 'dpo.py'], baseModels: ['qwen-7b'] };
    const layout = layoutWithTemplates('trainers', [template, dpo]);
    expect((await seedLayout(t.store, layout)).updated).toEqual(['fleet trainers']);
    expect((await seedLayout(t.store, layout)).updated).toEqual([]);
    expect((await t.store.trainingJobs.templates(fleetId))!.map((x) => x.name)).toEqual(['lora-sft', 'dpo']);
    const submitted = await t.store.trainingJobs.submit({
      fleetId,
      spec: spec({ template: 'dpo', params: {} }),
      requestedBy: 'api:ci',
    });
    expect(submitted).toMatchObject({ outcome: 'submitted', job: { template: 'dpo', params: {} } });
    await seedLayout(t.store, layoutWithTemplates('trainers'));
  });

  it('writes no submission checked against templates the fleet no longer has', async () => {
    const before = await t.store.trainingJobs.list(fleetId, { limit: 1000 });
    const outdated = insertJob({
      fleetId,
      spec: trainingJobSpecSchema.parse(spec()),
      storedTemplates: [],
      requestedBy: 'api:ci',
      at: tick(),
    });
    expect(rowsOf(await t.database.db.execute(outdated))).toEqual([]);
    expect(await t.store.trainingJobs.list(fleetId, { limit: 1000 })).toEqual(before);
  });

  it('has no templates for a fleet whose layout declares none, and none for an unknown fleet', async () => {
    await seedLayout(t.store, testLayout({ fleet: 'no-training' }));
    const bare = (await t.store.fleets.snapshot('no-training'))!;
    expect(await t.store.trainingJobs.templates(bare.id)).toEqual([]);
    expect(await t.store.trainingJobs.submit({ fleetId: bare.id, spec: spec(), requestedBy: 'api:ci' })).toMatchObject({
      outcome: 'invalid',
      problems: [{ path: '$.template' }],
    });
    expect(await t.store.trainingJobs.templates('00000000-0000-4000-8000-000000000000')).toBeNull();
  });

  it('runs a job through preemption and restart, refusing the old generation, to success', async () => {
    const job = await submit();
    tick();
    const first = await applied(t.store.trainingJobs.transition(job.id, { type: 'start', domainId, gpuIndex: 0 }));
    expect(first).toMatchObject({
      state: 'running',
      runGeneration: 1,
      domainId,
      gpuIndex: 0,
      startedAt: clock.toISOString(),
    });

    await applied(t.store.trainingJobs.commitCheckpoint(job.id, 1, 100, '/ckpt/step-100'));
    tick();
    const preempted = await applied(t.store.trainingJobs.transition(job.id, { type: 'preempt', generation: 1 }));
    expect(preempted).toMatchObject({ state: 'preempted', preemptedAtStep: 100 });

    tick();
    const second = await applied(t.store.trainingJobs.transition(job.id, { type: 'start', domainId, gpuIndex: 1 }));
    expect(second).toMatchObject({
      state: 'running',
      runGeneration: 2,
      gpuIndex: 1,
      preemptedAtStep: null,
      checkpoint: { step: 100, path: '/ckpt/step-100', generation: 1 },
      startedAt: first.startedAt,
    });

    // The first run's trainer, still writing after it was replaced, is fenced off.
    const stale = await t.store.trainingJobs.commitCheckpoint(job.id, 1, 400, '/ckpt/step-400-old');
    expect(stale).toEqual({
      outcome: 'refused',
      code: 'stale_generation',
      reason: "run generation 1 is not the job's current run (2)",
      job: second,
    });
    expect(await t.store.trainingJobs.get(job.id)).toEqual(second);

    await applied(t.store.trainingJobs.commitCheckpoint(job.id, 2, 1000, '/ckpt/step-1000'));
    tick();
    const done = await applied(t.store.trainingJobs.transition(job.id, { type: 'succeed', generation: 2 }));
    expect(done).toMatchObject({
      state: 'succeeded',
      runGeneration: 2,
      checkpoint: { step: 1000, path: '/ckpt/step-1000', generation: 2 },
      finishedAt: clock.toISOString(),
    });

    const history = await t.store.trainingJobs.history(job.id);
    expect(history.map((e) => [e.type, e.fromState, e.toState, e.runGeneration])).toEqual([
      ['submitted', null, 'queued', 0],
      ['start', 'queued', 'running', 1],
      ['checkpointCommitted', 'running', 'running', 1],
      ['preempt', 'running', 'preempted', 1],
      ['start', 'preempted', 'running', 2],
      ['checkpointCommitted', 'running', 'running', 2],
      ['succeed', 'running', 'succeeded', 2],
    ]);
    expect(history[2]!.data).toEqual({ generation: 1, step: 100, path: '/ckpt/step-100' });

    // A finished job stays finished: the refusal changes nothing and records nothing.
    const cancel = await t.store.trainingJobs.transition(job.id, { type: 'cancel' });
    expect(cancel).toMatchObject({
      outcome: 'refused',
      code: 'illegal_transition',
      reason: 'a succeeded job cannot become cancelled',
    });
    expect(await t.store.trainingJobs.history(job.id)).toHaveLength(history.length);
  });

  it('records where a cancelled running job ran, for the scheduler to stop its trainer', async () => {
    const job = await submit();
    await applied(t.store.trainingJobs.transition(job.id, { type: 'start', domainId, gpuIndex: 0 }));
    const cancelled = await applied(t.store.trainingJobs.transition(job.id, { type: 'cancel', reason: 'superseded' }));
    expect(cancelled).toMatchObject({ state: 'cancelled', reason: 'superseded', finishedAt: clock.toISOString() });
    const [, , entry] = await t.store.trainingJobs.history(job.id);
    expect(entry).toMatchObject({ type: 'cancel', data: { reason: 'superseded', domainId, gpuIndex: 0 } });
  });

  it('refuses an unknown job', async () => {
    await expect(
      t.store.trainingJobs.transition('00000000-0000-4000-8000-000000000000', { type: 'cancel' }),
    ).rejects.toMatchObject({ code: 'not_found' });
    expect(await t.store.trainingJobs.get('nope')).toBeNull();
  });

  it('serialises concurrent transitions on one job: one start wins, the others see it running', async () => {
    const job = await submit();
    const starts = await Promise.all(
      [0, 1, 2, 3].map((gpuIndex) => t.store.trainingJobs.transition(job.id, { type: 'start', domainId, gpuIndex })),
    );
    const won = starts.filter((r) => r.outcome === 'applied');
    expect(won).toHaveLength(1);
    expect(starts.filter((r) => r.outcome === 'refused').map((r) => r.outcome === 'refused' && r.reason)).toEqual([
      'a running job cannot become running',
      'a running job cannot become running',
      'a running job cannot become running',
    ]);
    const stored = await t.store.trainingJobs.get(job.id);
    expect(stored).toMatchObject({ state: 'running', runGeneration: 1, gpuIndex: won[0]!.job.gpuIndex });
    expect((await t.store.trainingJobs.history(job.id)).filter((e) => e.type === 'start')).toHaveLength(1);
  });

  it('serialises concurrent checkpoint commits: the committed step never goes back', async () => {
    const job = await submit();
    await applied(t.store.trainingJobs.transition(job.id, { type: 'start', domainId, gpuIndex: 0 }));
    const steps = [50, 300, 100, 250, 200, 150];
    const results = await Promise.all(
      steps.map((step) => t.store.trainingJobs.commitCheckpoint(job.id, 1, step, `/ckpt/${step}`)),
    );
    const taken = results.filter((r) => r.outcome === 'applied').map((r) => r.job.checkpoint!.step);
    // Each applied commit saw every one before it: the steps it left form a rising sequence.
    const history = await t.store.trainingJobs.history(job.id);
    const committed = history.filter((e) => e.type === 'checkpointCommitted').map((e) => e.data.step as number);
    expect(committed).toEqual([...committed].sort((a, b) => a - b));
    expect([...committed].sort((a, b) => a - b)).toEqual([...taken].sort((a, b) => a - b));
    expect(committed).toContain(300);
    expect((await t.store.trainingJobs.get(job.id))!.checkpoint).toEqual({
      step: 300,
      path: '/ckpt/300',
      generation: 1,
    });
    for (const r of results) if (r.outcome === 'refused') expect(r.code).toBe('invalid_checkpoint');
  });

  it('lists a fleet’s jobs oldest first, by state, and in pages', async () => {
    const all = await t.store.trainingJobs.list(fleetId);
    expect(all.map((j) => j.createdAt)).toEqual([...all.map((j) => j.createdAt)].sort());
    const queued = await submit({ adapterName: 'listed' });
    const waiting = await t.store.trainingJobs.list(fleetId, { states: ['queued', 'preempted'] });
    expect(waiting.every((j) => j.state === 'queued' || j.state === 'preempted')).toBe(true);
    expect(waiting.map((j) => j.id)).toContain(queued.id);
    expect((await t.store.trainingJobs.list(fleetId, { states: ['succeeded'] })).map((j) => j.state)).toEqual([
      'succeeded',
    ]);
    const firstPage = await t.store.trainingJobs.list(fleetId, { limit: 2 });
    const rest = await t.store.trainingJobs.list(fleetId, { after: firstPage[1]! });
    expect([...firstPage, ...rest].map((j) => j.id)).toEqual([...all, queued].map((j) => j.id));
    expect(await t.store.trainingJobs.list('nope')).toEqual([]);
  });
});

/**
 * The race made certain on a server Postgres: another session holds the job's row lock while the starts
 * arrive, so all of them have read `queued` and wait to write when it lets go. The version guard lets one
 * write; the others write nothing, read the job again and find it running. Without the guard all four would
 * have written generation 1.
 */
describe('training job transitions racing on postgres', () => {
  let t: Awaited<ReturnType<typeof createTestDatabase>>;
  let side: postgres.Sql;
  beforeAll(async () => {
    t = await createTestDatabase({ now });
    side = postgres(t.url, { max: 2, onnotice: () => {} });
    await seedLayout(t.store, layoutWithTemplates('racers'));
  }, 60_000);
  afterAll(async () => {
    await side?.end({ timeout: 5 });
    await t?.drop();
  });

  it('applies one start of four sent while the row was held; the rest find it running', async () => {
    const snapshot = (await t.store.fleets.snapshot('racers'))!;
    const domainId = snapshot.domains[0]!.id;
    const submitted = await t.store.trainingJobs.submit({
      fleetId: snapshot.id,
      spec: spec(),
      requestedBy: 'api:ci',
    });
    if (submitted.outcome !== 'submitted') throw new Error('submit refused');
    const jobId = submitted.job.id;

    let release = () => {};
    const released = new Promise<void>((r) => (release = r));
    let held = () => {};
    const holding = new Promise<void>((r) => (held = r));
    const holder = side.begin(async (tx) => {
      await tx`select 1 from training_jobs where id = ${jobId} for update`;
      held();
      await released;
    });
    await holding;
    const starts = Promise.all(
      [0, 1, 2, 3].map((gpuIndex) => t.store.trainingJobs.transition(jobId, { type: 'start', domainId, gpuIndex })),
    );
    await eventually('four transitions waiting on the held row', async () => {
      const [row] = await side<{ n: number }[]>`
        select count(*)::int as n from pg_stat_activity
        where datname = current_database() and wait_event_type = 'Lock'`;
      return row!.n >= 4;
    });
    release();
    await holder;
    const results = await starts;

    expect(results.filter((r) => r.outcome === 'applied')).toHaveLength(1);
    expect(results.filter((r) => r.outcome === 'refused').map((r) => r.outcome === 'refused' && r.code)).toEqual([
      'illegal_transition',
      'illegal_transition',
      'illegal_transition',
    ]);
    expect(await t.store.trainingJobs.get(jobId)).toMatchObject({ state: 'running', runGeneration: 1 });
    expect((await t.store.trainingJobs.history(jobId)).map((e) => e.type)).toEqual(['submitted', 'start']);
  });
});
