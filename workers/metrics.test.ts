import { readFileSync } from 'node:fs';
import path from 'node:path';
import { parse as parseYaml } from 'yaml';
import { createActivities } from '../activities';
import type { HostObservation } from '../activities/deps';
import { domainRole } from '../core/domain-role';
import { OPERATION_KINDS } from '../schemas/enums';
import type { SupervisorStatus } from '../schemas/supervisor';
import { parsePrometheusText, sumSamples } from '../supervisor/prometheus-text';
import { createWorkerMetrics } from './metrics';

const status = (over: { awake: boolean; step?: number; at: string }): SupervisorStatus => ({
  models: [
    {
      name: 'llama',
      gpuIndex: 0,
      port: 8000,
      state: over.awake ? ('awake' as const) : ('asleep' as const),
      runningRequests: 0,
      error: null,
    },
  ],
  training: [
    {
      gpuIndex: 0,
      state: 'running' as const,
      pids: [42],
      startedAt: over.at,
      lastExit: null,
      ...(over.step === undefined
        ? {}
        : { progress: { step: over.step, totalSteps: null, loss: null, at: over.at, ageMs: 0, error: null } }),
    },
  ],
  at: over.at,
});

/** A recorded poll of a domain in state `state`, last heard at `lastSeenAt`, answering `answer` (null: no status). */
const observed = (
  lastSeenAt: string | null,
  answer: SupervisorStatus | null,
  state: HostObservation['state'] = 'ready',
  role: HostObservation['role'] = domainRole(state, true),
): HostObservation => ({
  state,
  role,
  lastSeenAt,
  staleAfterMs: 5_000,
  status: answer,
  answeredAt: answer ? lastSeenAt : null,
});

/** A standby's status at `at`: GPU 0 training or not. */
const standbyStatus = (training: boolean, at: string): SupervisorStatus => {
  const s = status({ awake: false, at });
  return { ...s, training: s.training.map((t) => ({ ...t, state: training ? 'running' : 'idle' })) };
};

describe('the standby harvest (haru_standby_gpu_seconds_total)', () => {
  const west = { fleet: 'prod', domain: 'west' };
  const seconds = async (metrics: ReturnType<typeof createWorkerMetrics>, use: string) =>
    sumSamples(parsePrometheusText(await metrics.registry.metrics()), 'haru_standby_gpu_seconds_total', {
      ...west,
      use,
    });
  const at = (s: number) => new Date(Date.UTC(2026, 0, 1, 0, 0, s)).toISOString();
  const poll = (
    metrics: ReturnType<typeof createWorkerMetrics>,
    s: number,
    answer: SupervisorStatus | null,
    role = 'standby',
  ) => metrics.hostObserved(west, observed(at(s), answer, 'ready', role as HostObservation['role']));

  it("counts a standby's training GPU time between answered polls, by what each earlier poll saw", async () => {
    const metrics = createWorkerMetrics();
    metrics.knowFleets([{ slug: 'prod', domains: [{ slug: 'west' }] }]);
    expect([await seconds(metrics, 'training'), await seconds(metrics, 'idle')]).toEqual([0, 0]);
    poll(metrics, 0, standbyStatus(true, at(0)));
    poll(metrics, 1, standbyStatus(true, at(1)));
    poll(metrics, 2, standbyStatus(false, at(2))); // the second before it trained
    poll(metrics, 4, standbyStatus(false, at(4)));
    expect([await seconds(metrics, 'training'), await seconds(metrics, 'idle')]).toEqual([2, 2]);
  });

  it('counts nothing across an unanswered poll, over a gap past the stale limit, or while not a standby', async () => {
    const metrics = createWorkerMetrics();
    poll(metrics, 0, standbyStatus(true, at(0)));
    poll(metrics, 1, null); // no answer: what the GPU did until the next one is not known
    poll(metrics, 2, standbyStatus(true, at(2)));
    poll(metrics, 9, standbyStatus(true, at(9))); // 7 s later, past the 5 s stale limit
    poll(metrics, 10, standbyStatus(true, at(10)), 'active'); // promoted: its GPUs serve now
    poll(metrics, 11, standbyStatus(true, at(11)), 'active');
    poll(metrics, 12, standbyStatus(true, at(12)));
    poll(metrics, 13, standbyStatus(true, at(13)));
    expect(await seconds(metrics, 'training')).toBe(1); // 12 → 13 alone
  });
});

describe('the monitor’s series', () => {
  it('counts polls per fleet, domain and outcome, and keeps each host’s latest state, however often set', async () => {
    const metrics = createWorkerMetrics({ now: () => new Date('2026-01-01T00:00:04.000Z') });
    const east = { fleet: 'prod', domain: 'east' };
    const west = { fleet: 'prod', domain: 'west' };
    for (let i = 0; i < 3; i += 1) metrics.domainPolled({ ...east, outcome: 'ok' });
    metrics.domainPolled({ ...east, outcome: 'error' });
    metrics.domainPolled({ ...west, outcome: 'ok' });
    // The host's own clock (`at`) is not when the watcher heard it: the worker's receive time is.
    metrics.hostObserved(
      east,
      observed('2026-01-01T00:00:01.200Z', status({ awake: true, step: 7, at: '2025-12-31T23:00:00.000Z' })),
    );
    metrics.hostObserved(
      west,
      observed('2026-01-01T00:00:01.000Z', status({ awake: true, at: '2026-01-01T00:00:01.000Z' })),
    );
    metrics.hostObserved(
      west,
      observed('2026-01-01T00:00:03.000Z', status({ awake: false, step: 12, at: '2026-01-01T00:00:03.000Z' })),
    );
    const samples = parsePrometheusText(await metrics.registry.metrics());
    const value = (name: string, labels: Record<string, string>) => sumSamples(samples, name, labels);
    expect(value('haru_worker_domain_polls_total', { ...east, outcome: 'ok' })).toBe(3);
    expect(value('haru_worker_domain_polls_total', { ...east, outcome: 'error' })).toBe(1);
    expect(value('haru_worker_domain_polls_total', { ...west, outcome: 'ok' })).toBe(1);
    expect(value('haru_model_awake', { ...east, model: 'llama' })).toBe(1);
    expect(value('haru_model_awake', { ...west, model: 'llama' })).toBe(0);
    expect(value('haru_training_state', { ...west, gpu: '0' })).toBe(1);
    expect(value('haru_training_step', { ...east, gpu: '0' })).toBe(7);
    expect(value('haru_training_step', { ...west, gpu: '0' })).toBe(12);
    expect(value('haru_domain_last_poll_timestamp_seconds', east)).toBe(Date.parse('2026-01-01T00:00:01.200Z') / 1000);
    expect(value('haru_domain_last_poll_timestamp_seconds', west)).toBe(Date.parse('2026-01-01T00:00:03.000Z') / 1000);
  });

  it("clears a host's models and training once it is stale or failed, and keeps when it was last heard", async () => {
    let now = new Date('2026-01-01T00:00:02.000Z');
    const metrics = createWorkerMetrics({ now: () => now });
    const east = { fleet: 'prod', domain: 'east' };
    const west = { fleet: 'prod', domain: 'west' };
    const heard = '2026-01-01T00:00:01.000Z';
    metrics.hostObserved(east, observed(heard, status({ awake: true, step: 7, at: heard })));
    metrics.hostObserved(west, observed(heard, status({ awake: true, step: 3, at: heard })));
    const read = async () => {
      const samples = parsePrometheusText(await metrics.registry.metrics());
      return (name: string, labels: Record<string, string>) =>
        samples.some((s) => s.name === name && Object.entries(labels).every(([k, v]) => s.labels[k] === v))
          ? sumSamples(samples, name, labels)
          : 'absent';
    };
    let value = await read();
    expect(value('haru_model_awake', { ...east, model: 'llama' })).toBe(1);

    // East stops answering: its polls fail (no status) and its sighting ages past the stale limit (5 s).
    metrics.hostObserved(east, observed(heard, null));
    now = new Date('2026-01-01T00:00:05.900Z');
    value = await read();
    expect(value('haru_model_awake', { ...east, model: 'llama' })).toBe(1); // 4.9 s: not stale yet
    now = new Date('2026-01-01T00:02:47.000Z');
    metrics.hostObserved(west, observed('2026-01-01T00:02:46.900Z', null, 'failed'));
    value = await read();
    expect(value('haru_model_awake', { ...east, model: 'llama' })).toBe('absent');
    expect(value('haru_training_state', { ...east, gpu: '0' })).toBe('absent');
    expect(value('haru_training_step', { ...east, gpu: '0' })).toBe('absent');
    expect(value('haru_domain_last_poll_timestamp_seconds', east)).toBe(Date.parse(heard) / 1000);
    // West answers (a proof of life) but is failed: what it last said is not shown as its state either.
    expect(value('haru_model_awake', { ...west, model: 'llama' })).toBe('absent');
    expect(value('haru_training_step', { ...west, gpu: '0' })).toBe('absent');

    // East answers again: its report is current again.
    metrics.hostObserved(east, observed('2026-01-01T00:02:46.950Z', status({ awake: false, at: heard })));
    value = await read();
    expect(value('haru_model_awake', { ...east, model: 'llama' })).toBe(0);
  });
});

/**
 * The counters an alert rule or a dashboard panel reads with `increase()` or `rate()`, with the label values
 * they select: `[name, {label: value}]` for each `name{label="value", …}` in deploy/ (a `=~` matcher selects
 * nothing fixed, so it adds no label).
 */
function countersReadByRulesAndPanels(): [string, Record<string, string>][] {
  const deploy = path.resolve(__dirname, '../deploy');
  const rules = parseYaml(readFileSync(path.join(deploy, 'prometheus/haru.rules.yml'), 'utf8')) as {
    groups: { rules: { expr: string }[] }[];
  };
  const dashboard = JSON.parse(readFileSync(path.join(deploy, 'grafana/haru.json'), 'utf8')) as {
    panels: { targets: { expr: string }[] }[];
  };
  const exprs = [
    ...rules.groups.flatMap((g) => g.rules.map((r) => r.expr)),
    ...dashboard.panels.flatMap((p) => p.targets.map((t) => t.expr)),
  ];
  return exprs.flatMap((expr) =>
    [...expr.matchAll(/\b(?:increase|rate)\((haru_[a-z0-9_]+_total)(?:\{([^}]*)\})?/g)].map(
      ([, name, matchers]): [string, Record<string, string>] => [
        name!,
        Object.fromEntries([...(matchers ?? '').matchAll(/(\w+)\s*=\s*"([^"]*)"/g)].map(([, k, v]) => [k!, v!])),
      ],
    ),
  );
}

describe('counters before their first event', () => {
  const fleet = { slug: 'prod', domains: [{ slug: 'east' }, { slug: 'west' }] };
  /** As the worker sets them up: its activity types and the fleets in the store known (workers/worker.ts). */
  const freshWorkerMetrics = () => {
    const metrics = createWorkerMetrics();
    metrics.knowActivityTypes(
      Object.keys(createActivities({ store: {}, supervisor: {}, now: () => new Date() } as never)),
    );
    metrics.knowFleets([fleet]);
    return metrics;
  };

  it('writes every series an alert or panel counts at 0, so the first failure is an increase', async () => {
    const metrics = freshWorkerMetrics();
    const text = await metrics.registry.metrics();
    // The alerts' own series, as the text exposition writes them.
    expect(text).toContain('haru_operations_total{fleet="prod",kind="promote",outcome="failed"} 0\n');
    expect(text).toContain('haru_worker_activity_executions_total{activity="verifyGpuReleased",outcome="failed"} 0\n');
    const samples = parsePrometheusText(text);
    const zeroAt = (name: string, labels: Record<string, string>) => sumSamples(samples, name, labels);
    for (const kind of OPERATION_KINDS)
      for (const outcome of ['succeeded', 'failed', 'cancelled'])
        expect([kind, outcome, zeroAt('haru_operations_total', { fleet: 'prod', kind, outcome })]).toEqual([
          kind,
          outcome,
          0,
        ]);
    for (const outcome of ['committed', 'already_committed', 'conflict'])
      expect([outcome, zeroAt('haru_worker_routing_commits_total', { fleet: 'prod', outcome })]).toEqual([outcome, 0]);
    for (const domain of ['east', 'west'])
      for (const outcome of ['ok', 'error'])
        expect([domain, outcome, zeroAt('haru_worker_domain_polls_total', { fleet: 'prod', domain, outcome })]).toEqual(
          [domain, outcome, 0],
        );
    // Every counter deploy/ reads that the worker exports, with the labels it selects.
    const read = countersReadByRulesAndPanels().filter(([name]) => metrics.registry.getSingleMetric(name));
    expect(read.map(([name]) => name)).toEqual(
      expect.arrayContaining([
        'haru_operations_total',
        'haru_worker_activity_executions_total',
        'haru_worker_routing_commits_total',
        'haru_worker_domain_polls_total',
      ]),
    );
    for (const [name, labels] of read) expect([name, labels, zeroAt(name, labels)]).toEqual([name, labels, 0]);
  });

  it('knows a fleet again without touching what it counted', async () => {
    const metrics = freshWorkerMetrics();
    const failed = { fleet: 'prod', kind: 'promote', outcome: 'failed' };
    metrics.operationFinished(failed, 3);
    metrics.knowFleets([fleet]);
    const samples = parsePrometheusText(await metrics.registry.metrics());
    expect(sumSamples(samples, 'haru_operations_total', failed)).toBe(1);
  });
});
