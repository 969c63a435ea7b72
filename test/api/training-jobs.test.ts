/**
 * The training job routes against a real API over Postgres: a job submitted, listed, shown with its history
 * and cancelled through the state machine; every refusal in the one error envelope (a malformed job or params
 * that do not fit the template 400, an undeclared template 422, a finished job 409, unknown fleets and jobs
 * 404) with nothing written; and the scopes: `read` lists and shows, only `operate` submits and cancels.
 */
import type { ApiKey } from '../../api/auth/api-key';
import type { Scope } from '../../api/auth/scopes';
import { tokenDigest } from '../../lib/bearer-auth';
import type { FleetSnapshot } from '../../schemas/entities';
import type { FleetLayoutInput } from '../../schemas/layout';
import type { TrainerTemplateInput } from '../../schemas/trainer-template';
import { call, type Harness, type JsonBody, startHarness, twoDomainLayout } from './support/harness';

const secretOf = (name: string) => `${name}-secret-0123456789`;
const key = (name: string, scopes: Scope[]): ApiKey => ({ name, digest: tokenDigest(secretOf(name)), scopes });
const READ = 'reader';
const OPERATE = 'oncall';

const template = {
  name: 'lora-sft',
  command: ['python', 'examples/lora-trainer.py'],
  baseModels: ['test-model'],
  params: {
    rank: { type: 'integer', min: 1, max: 256, default: 16 },
    optimizer: { type: 'string', values: ['adamw', 'sgd'] },
  },
} satisfies TrainerTemplateInput;

const withTemplates = (layout: FleetLayoutInput): FleetLayoutInput => ({
  ...layout,
  training: { templates: [template] },
});

const spec = (overrides: Record<string, unknown> = {}) => ({
  template: 'lora-sft',
  baseModel: 'test-model',
  adapterName: 'support-bot',
  dataset: 's3://datasets/support.jsonl',
  steps: 1000,
  params: { optimizer: 'adamw' },
  ...overrides,
});

describe('training job routes', () => {
  let h: Harness;
  let fleet: FleetSnapshot;
  let other: FleetSnapshot;

  beforeAll(async () => {
    h = await startHarness({ config: { apiKeys: [key(READ, ['read']), key(OPERATE, ['operate'])] } });
    fleet = await h.seed(
      withTemplates(twoDomainLayout({ eastUrl: 'http://127.0.0.1:9', westUrl: 'http://127.0.0.1:9' })),
    );
    other = await h.seed(
      withTemplates(twoDomainLayout({ eastUrl: 'http://127.0.0.1:9', westUrl: 'http://127.0.0.1:9' })),
    );
  });
  afterAll(() => h?.close());

  const jobs = (slug = fleet.slug) => `${h.url}/v1/fleets/${slug}/training/jobs`;
  const submit = (body: unknown, as = OPERATE, slug = fleet.slug) => call(jobs(slug), { body, token: secretOf(as) });
  const read = (url: string, as = READ) => call(url, { token: secretOf(as) });
  const cancel = (id: string, body: unknown = {}, as = OPERATE) =>
    call(`${jobs()}/${id}/cancel`, { body, token: secretOf(as) });
  const listedIds = async (query = '') =>
    ((await read(`${jobs()}${query}`)).body.jobs as JsonBody[]).map((j) => j.id as string);
  /** A submission that must be refused: its answer, and proof that no job was written. */
  async function refused(body: unknown) {
    const before = await h.store.trainingJobs.list(fleet.id, { limit: 1000 });
    const res = await submit(body);
    expect(await h.store.trainingJobs.list(fleet.id, { limit: 1000 })).toEqual(before);
    return res;
  }

  it('submits, lists, shows and cancels a job, each change in its history', async () => {
    const submitted = await submit(spec({ priority: 5, publishOnSuccess: true }));
    expect(submitted.status).toBe(202);
    const job = submitted.body;
    expect(job).toMatchObject({
      fleetId: fleet.id,
      state: 'queued',
      template: 'lora-sft',
      params: { optimizer: 'adamw', rank: 16 },
      priority: 5,
      publishOnSuccess: true,
      runGeneration: 0,
      requestedBy: `api:${OPERATE}`,
    });
    expect(await h.store.trainingJobs.get(job.id)).toEqual(job);

    expect(await listedIds()).toContain(job.id);
    expect(await listedIds('?state=queued,preempted')).toContain(job.id);
    expect(await listedIds('?state=cancelled')).not.toContain(job.id);

    const shown = await read(`${jobs()}/${job.id}`);
    expect(shown.status).toBe(200);
    expect(shown.body).toMatchObject({ ...job, nextCursor: null });
    expect(shown.body.history).toEqual([
      expect.objectContaining({ jobId: job.id, type: 'submitted', fromState: null, toState: 'queued' }),
    ]);

    const cancelled = await cancel(job.id, { reason: 'wrong dataset' });
    expect(cancelled.status).toBe(200);
    expect(cancelled.body).toMatchObject({ id: job.id, state: 'cancelled', reason: 'wrong dataset' });
    expect(cancelled.body.finishedAt).toEqual(expect.any(String));

    const after = (await read(`${jobs()}/${job.id}`)).body;
    expect(after.state).toBe('cancelled');
    expect(after.history.map((e: JsonBody) => [e.type, e.fromState, e.toState, e.data])).toEqual([
      ['submitted', null, 'queued', expect.anything()],
      ['cancel', 'queued', 'cancelled', { reason: 'wrong dataset' }],
    ]);
    expect(await listedIds('?state=cancelled')).toContain(job.id);
    expect(await listedIds('?state=queued')).not.toContain(job.id);
  });

  it('answers 409 training_job_conflict to a cancel of a finished job, changing nothing', async () => {
    const { body: job } = await submit(spec());
    const west = fleet.domains.find((d) => d.slug === 'west')!;
    await h.store.trainingJobs.transition(job.id, { type: 'start', domainId: west.id, gpuIndex: 0 });
    await h.store.trainingJobs.transition(job.id, { type: 'succeed', generation: 1 });
    const history = await h.store.trainingJobs.history(job.id);

    const res = await cancel(job.id);
    expect(res.status).toBe(409);
    expect(res.body).toEqual({
      error: {
        code: 'training_job_conflict',
        message: `training job ${job.id}: a succeeded job cannot become cancelled`,
      },
    });
    expect(await h.store.trainingJobs.get(job.id)).toMatchObject({ state: 'succeeded' });
    expect(await h.store.trainingJobs.history(job.id)).toEqual(history);
  });

  it('cancels a running job, recording where it ran for the scheduler to stop its trainer', async () => {
    const { body: job } = await submit(spec());
    const west = fleet.domains.find((d) => d.slug === 'west')!;
    await h.store.trainingJobs.transition(job.id, { type: 'start', domainId: west.id, gpuIndex: 0 });
    const res = await cancel(job.id);
    expect(res.body).toMatchObject({ state: 'cancelled', reason: 'cancelled through the API' });
    const history = (await read(`${jobs()}/${job.id}`)).body.history as JsonBody[];
    expect(history.at(-1)).toMatchObject({
      type: 'cancel',
      fromState: 'running',
      data: { reason: 'cancelled through the API', domainId: west.id, gpuIndex: 0 },
    });
  });

  it('answers 400 invalid_request naming every malformed field at its JSON path', async () => {
    const res = await refused({ ...spec({ steps: 0, adapterName: 'has space' }), gpu: 3 });
    expect(res.status).toBe(400);
    expect(res.body).toEqual({ error: { code: 'invalid_request', message: expect.any(String) } });
    const lines = (res.body.error.message as string).split('\n');
    expect(lines[0]).toMatch(/^invalid training job: \$\./);
    expect(lines.map((l) => l.replace('invalid training job: ', '').split(':')[0]).sort()).toEqual([
      '$.adapterName',
      '$.gpu',
      '$.steps',
    ]);
    expect(res.body.error.message).toContain('$.gpu: unknown key');

    const noBody = await refused('');
    expect(noBody.status).toBe(400);
    expect(noBody.body.error.message).toContain('$.template');
  });

  it('answers 400 invalid_request for params and a base model that do not fit the template', async () => {
    const res = await refused(spec({ baseModel: 'llama-8b', params: { rank: 0, optimizer: 'lion', dropout: 0.1 } }));
    expect(res.status).toBe(400);
    expect(res.body).toEqual({
      error: {
        code: 'invalid_request',
        message: [
          'invalid training job: $.baseModel: template "lora-sft" trains test-model, not "llama-8b"',
          '$.params.rank: must be at least 1',
          '$.params.optimizer: must be one of "adamw", "sgd"',
          '$.params.dropout: is not a parameter of the template',
        ].join('\n'),
      },
    });
    const wrongType = await refused(spec({ params: { rank: 'sixteen' } }));
    expect(wrongType.body.error).toEqual({
      code: 'invalid_request',
      message: 'invalid training job: $.params.rank: must be an integer',
    });
  });

  it("answers 422 invalid_target for a template the fleet's layout does not declare", async () => {
    const res = await refused(spec({ template: 'dpo' }));
    expect(res.status).toBe(422);
    expect(res.body).toEqual({
      error: { code: 'invalid_target', message: 'no trainer template "dpo" (the layout has: lora-sft)' },
    });
  });

  it('lets a read-only key list and show jobs, and refuses it submitting or cancelling', async () => {
    const { body: job } = await submit(spec());
    const forbidden = (scope: string) => ({
      error: { code: 'forbidden', message: expect.stringContaining(`lacks the "${scope}" scope`) },
    });
    const before = await h.store.trainingJobs.list(fleet.id, { limit: 1000 });
    const submitted = await submit(spec(), READ);
    expect([submitted.status, submitted.body]).toEqual([403, forbidden('operate')]);
    const cancelled = await cancel(job.id, {}, READ);
    expect([cancelled.status, cancelled.body]).toEqual([403, forbidden('operate')]);
    expect(await h.store.trainingJobs.list(fleet.id, { limit: 1000 })).toEqual(before);
    expect((await read(jobs())).status).toBe(200);
    expect((await read(`${jobs()}/${job.id}`)).status).toBe(200);
    expect((await call(jobs(), { body: spec() })).status).toBe(401);
  });

  it('answers 404 for an unknown fleet, an unknown job and a job of another fleet', async () => {
    const { body: theirs } = await submit(spec(), OPERATE, other.slug);
    expect((await submit(spec(), OPERATE, 'no-such-fleet')).body.error.code).toBe('fleet_not_found');
    expect((await read(jobs('no-such-fleet'))).status).toBe(404);
    for (const id of ['00000000-0000-4000-8000-000000000000', 'not-a-uuid', theirs.id]) {
      const shown = await read(`${jobs()}/${id}`);
      expect([shown.status, shown.body]).toEqual([
        404,
        { error: { code: 'training_job_not_found', message: `training job ${id} not found in fleet ${fleet.slug}` } },
      ]);
      expect((await cancel(id)).body.error.code).toBe('training_job_not_found');
    }
    expect(await h.store.trainingJobs.get(theirs.id)).toMatchObject({ state: 'queued' });
  });

  it('lists in pages and refuses an unknown state', async () => {
    const all = await listedIds();
    expect(all.length).toBeGreaterThanOrEqual(3);
    const first = (await read(`${jobs()}?limit=2`)).body;
    expect(first.jobs.map((j: JsonBody) => j.id)).toEqual(all.slice(0, 2));
    expect(first.nextAfter).toBe(all[1]);
    const rest = (await read(`${jobs()}?after=${first.nextAfter}&limit=1000`)).body;
    expect(rest.jobs.map((j: JsonBody) => j.id)).toEqual(all.slice(2));
    expect(rest.nextAfter).toBeNull();

    const bad = await read(`${jobs()}?state=queued,done`);
    expect(bad.status).toBe(400);
    expect(bad.body.error).toEqual({
      code: 'invalid_request',
      message: expect.stringMatching(/^invalid query: state/),
    });
  });

  it('pages through a long history with nextCursor', async () => {
    const { body: job } = await submit(spec());
    const west = fleet.domains.find((d) => d.slug === 'west')!;
    await h.store.trainingJobs.transition(job.id, { type: 'start', domainId: west.id, gpuIndex: 0 });
    await h.store.trainingJobs.commitCheckpoint(job.id, 1, 100, '/ckpt/100');
    const first = (await read(`${jobs()}/${job.id}?limit=2`)).body;
    expect(first.history.map((e: JsonBody) => e.type)).toEqual(['submitted', 'start']);
    expect(first.nextCursor).toBe(first.history[1].id);
    const rest = (await read(`${jobs()}/${job.id}?after=${first.nextCursor}&limit=2`)).body;
    expect(rest.history.map((e: JsonBody) => e.type)).toEqual(['checkpointCommitted']);
    expect(rest.nextCursor).toBeNull();
  });
});
