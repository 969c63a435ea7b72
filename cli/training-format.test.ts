import { ID } from '../core/fleet-fixtures';
import {
  cancelledRunHistory,
  historyFixture,
  JOB_ID,
  T0,
  trainingJobFixture,
} from '../test/support/training-job-fixtures';
import { formatJobDetail, formatJobHistory, formatJobs, historyDetail, jobLine } from './training-format';

const now = new Date(Date.parse(T0) + 5 * 3_600_000 + 20 * 60_000);
const domainName = (id: string) => ({ [ID.a]: 'a', [ID.b]: 'b' })[id] ?? id;
const opts = { wide: false, now, domainName };

const running = trainingJobFixture({
  state: 'running',
  runGeneration: 2,
  domainId: ID.b,
  gpuIndex: 1,
  checkpoint: { step: 300, path: '/ckpt/step-300', generation: 1 },
  startedAt: T0,
});
const cancelled = trainingJobFixture({
  id: '00000000-0000-4000-8000-0000000000c2',
  state: 'cancelled',
  runGeneration: 1,
  domainId: ID.b,
  gpuIndex: 0,
  reason: 'wrong dataset',
  createdAt: new Date(Date.parse(T0) + 3_600_000).toISOString(),
  finishedAt: now.toISOString(),
});

describe('formatJobs', () => {
  it('shows each job with its AGE, progress, and the slot only while it runs', () => {
    const [header, first, second] = formatJobs([running, cancelled], opts).split('\n');
    expect(header).toMatch(/^AGE +JOB +TEMPLATE +BASE MODEL +ADAPTER +STATE +PROGRESS +SLOT$/);
    expect(first).toMatch(new RegExp(`^5h20m +${JOB_ID} +lora-sft +llama +support-bot +running +300/1000 +b/gpu1$`));
    expect(second).toMatch(/^4h20m +\S+ +lora-sft +llama +support-bot +cancelled +0\/1000 +-$/);
    expect(first).not.toContain('2030-');
  });

  it('adds the run, priority, times, requester and reason with -o wide', () => {
    const [header, , second] = formatJobs([running, cancelled], { ...opts, wide: true }).split('\n');
    expect(header).toMatch(/SLOT +RUN +PRIORITY +CREATED +STARTED +FINISHED +REQUESTED BY +REASON$/);
    expect(second).toMatch(
      /cancelled +0\/1000 +- +1 +0 +2030-01-01T01:00:00\.000Z +- +2030-01-01T05:20:00\.000Z +api:oncall +wrong dataset$/,
    );
  });
});

describe('formatJobHistory', () => {
  it('prints each line with its age, state move, run and what it adds, naming the slot by domain', () => {
    const lines = formatJobHistory(cancelledRunHistory(), opts).split('\n');
    expect(lines[0]).toMatch(/^AGE +EVENT +STATE +RUN +DETAIL$/);
    expect(lines.slice(1)).toEqual([
      expect.stringMatching(/^5h20m +submitted +queued +0 +by api:oncall$/),
      expect.stringMatching(/^5h19m +start +queued → running +1 +on b\/gpu0$/),
      expect.stringMatching(/^5h18m +checkpointCommitted +running +1 +step 300 at \/ckpt\/step-300$/),
      expect.stringMatching(/^5h17m +cancel +running → cancelled +1 +was on b\/gpu0, wrong dataset$/),
    ]);
  });

  it('puts the time and cursor first with -o wide', () => {
    const [header, first] = formatJobHistory(cancelledRunHistory(), { ...opts, wide: true }).split('\n');
    expect(header).toMatch(/^TIME +CURSOR +AGE +EVENT/);
    expect(first).toMatch(/^2030-01-01T00:00:00\.000Z +#1 +5h20m +submitted/);
  });

  it('keeps fields it does not know as name=value, and names a removed domain by its id', () => {
    const entry = historyFixture(9, 'fail', {
      data: { generation: 2, reason: 'OOM', domainId: ID.c, gpuIndex: 3, exitCode: 137 },
    });
    expect(historyDetail(entry, domainName)).toBe(`was on ${ID.c}/gpu3, OOM, exitCode=137`);
  });
});

describe('formatJobDetail', () => {
  it('shows what the job trains, its run and checkpoint, its params, then its history', () => {
    const text = formatJobDetail({ ...running, history: cancelledRunHistory(), nextCursor: null }, opts);
    expect(text).toContain(`training job ${JOB_ID} (fleet ${ID.fleet})`);
    expect(text).toMatch(/state: running +run: 2 +slot: b\/gpu1/);
    expect(text).toContain('checkpoint: step 300 at /ckpt/step-300 (run 1)');
    expect(text).toContain('params: rank=16');
    expect(text).toContain('publish on success: no');
    expect(text).toMatch(/started: 2030-01-01T00:00:00\.000Z \(5h20m ago\) +finished: -/);
    expect(text).toMatch(/\n\nAGE +EVENT/);
    expect(text).not.toContain('more in');
  });

  it('points to `training logs` when the history goes on past the page', () => {
    const text = formatJobDetail({ ...running, history: cancelledRunHistory(), nextCursor: 4 }, opts);
    expect(text.split('\n').at(-1)).toBe(`… more in \`haru training logs <fleet> ${JOB_ID}\``);
  });
});

it('jobLine says what the job trains into what, and its state', () => {
  expect(jobLine(cancelled)).toBe(
    'training job 00000000-0000-4000-8000-0000000000c2: lora-sft on llama → support-bot, cancelled',
  );
});
