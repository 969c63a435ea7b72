/**
 * `haru training` through the real `node bin/haru.js` against a stand-in API: the body `submit` sends, the
 * tables `list` and `logs` print (slots named by domain, ages), `logs` reading every page of the history, and
 * the exit statuses: 2 for bad input before any call, 1 for a refusal with the API's code and message.
 */
import type http from 'node:http';
import { fleetStatusFixture } from '../../test/support/fake-haru-api';
import { type FakeApi, startFakeApi } from '../../test/support/fake-haru-api';
import { runCli } from '../../test/support/cli';
import { ID } from '../../core/fleet-fixtures';
import { cancelledRunHistory, JOB_ID, trainingJobFixture } from '../../test/support/training-job-fixtures';

const JOBS = '/v1/fleets/prod/training/jobs';
const running = trainingJobFixture({ state: 'running', runGeneration: 1, domainId: ID.b, gpuIndex: 0 });
const history = cancelledRunHistory();
const bodies: unknown[] = [];

/** Answers 202 with the fixture job, keeping the body it was sent. */
function recordSubmission(req: http.IncomingMessage, res: http.ServerResponse): void {
  let text = '';
  req.on('data', (chunk: Buffer) => (text += chunk.toString()));
  req.on('end', () => {
    bodies.push(JSON.parse(text));
    res.writeHead(202, { 'content-type': 'application/json' }).end(JSON.stringify(trainingJobFixture()));
  });
}

let api: FakeApi;
beforeAll(async () => {
  api = await startFakeApi({
    '/v1/fleets/prod': { body: fleetStatusFixture() },
    [JOBS]: (req, res) =>
      req.method === 'POST'
        ? recordSubmission(req, res)
        : res.writeHead(200).end(JSON.stringify({ jobs: [running], nextAfter: null })),
    [`${JOBS}/${JOB_ID}`]: { body: { ...running, history: history.slice(0, 2), nextCursor: 2 } },
    [`${JOBS}/${JOB_ID}?after=2`]: { body: { ...running, history: history.slice(2), nextCursor: null } },
    [`${JOBS}/${JOB_ID}/cancel`]: {
      status: 409,
      body: { error: { code: 'training_job_conflict', message: 'a succeeded job cannot become cancelled' } },
    },
  });
});
afterAll(() => api.close());
const haru = (args: string[]) => runCli(args, { HARU_URL: api.url, HARU_API_TOKEN: '', HARU_CONFIG: '/nonexistent' });

it('`training submit` sends the job with its typed params, priority and publish flag', async () => {
  const run = await haru([
    ...['training', 'submit', 'prod', '--template', 'lora-sft', '--base-model', 'llama', '--adapter', 'support-bot'],
    ...['--dataset', 's3://d.jsonl', '--steps', '1000', '--param', 'rank=16', '--param', 'optimizer=adamw'],
    ...['--priority', '-5', '--publish'],
  ]);
  expect([run.code, run.stderr]).toEqual([0, '']);
  expect(bodies.at(-1)).toEqual({
    template: 'lora-sft',
    baseModel: 'llama',
    adapterName: 'support-bot',
    dataset: 's3://d.jsonl',
    steps: 1000,
    params: { rank: 16, optimizer: 'adamw' },
    priority: -5,
    publishOnSuccess: true,
  });
  expect(run.stdout.trim()).toBe(`submitted training job ${JOB_ID}: lora-sft on llama → support-bot, queued`);
});

it('`training list` names the running slot by its domain', async () => {
  const run = await haru(['training', 'list', 'prod']);
  expect(run.code).toBe(0);
  expect(run.stdout.split('\n')[1]).toMatch(
    new RegExp(`^\\S+ +${JOB_ID} +lora-sft +llama +support-bot +running +0/1000 +b/gpu0$`),
  );
});

it('`training logs` prints every page of the history, and -o json the lines themselves', async () => {
  const run = await haru(['training', 'logs', 'prod', JOB_ID]);
  expect(run.code).toBe(0);
  const lines = run.stdout.trim().split('\n');
  expect(lines.map((l) => l.split(/ {2,}/)[1])).toEqual([
    'EVENT',
    'submitted',
    'start',
    'checkpointCommitted',
    'cancel',
  ]);
  expect(lines.at(-1)).toMatch(/running → cancelled +1 +was on b\/gpu0, wrong dataset$/);
  const json = await haru(['training', 'logs', 'prod', JOB_ID, '-o', 'json']);
  expect(JSON.parse(json.stdout)).toEqual(history);
});

it('exits 1 with the API’s code and message when a cancel is refused', async () => {
  const run = await haru(['training', 'cancel', 'prod', JOB_ID]);
  expect([run.code, run.stdout]).toEqual([1, '']);
  expect(run.stderr.trim()).toBe('haru: training_job_conflict: a succeeded job cannot become cancelled');
});

it('exits 2 before any call for a bad --param, --state or a missing required option', async () => {
  const seen = api.seen.length;
  const submit = ['training', 'submit', 'prod', '--template', 't', '--base-model', 'm', '--adapter', 'a'];
  const badParam = await haru([...submit, '--dataset', 'd', '--steps', '1', '--param', 'rank']);
  expect([badParam.code, badParam.stderr.trim()]).toEqual([2, 'haru: --param rank: write name=value']);
  const missing = await haru([...submit, '--steps', '1']);
  expect(missing.code).toBe(2);
  expect(missing.stderr).toContain("required option '--dataset <ref>' not specified");
  const badState = await haru(['training', 'list', 'prod', '--state', 'queued,done']);
  expect(badState.code).toBe(2);
  expect(badState.stderr).toContain("option '--state <states>' argument 'queued,done' is invalid");
  expect(api.seen.length).toBe(seen);
});
