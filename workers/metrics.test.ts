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

describe('the monitor’s series', () => {
  it('counts polls per fleet, domain and outcome, and keeps each host’s latest state, however often set', async () => {
    const metrics = createWorkerMetrics();
    const east = { fleet: 'prod', domain: 'east' };
    const west = { fleet: 'prod', domain: 'west' };
    for (let i = 0; i < 3; i += 1) metrics.domainPolled({ ...east, outcome: 'ok' });
    metrics.domainPolled({ ...east, outcome: 'error' });
    metrics.domainPolled({ ...west, outcome: 'ok' });
    metrics.hostObserved(east, status({ awake: true, step: 7, at: '2026-01-01T00:00:01.000Z' }));
    metrics.hostObserved(west, status({ awake: true, at: '2026-01-01T00:00:01.000Z' }));
    metrics.hostObserved(west, status({ awake: false, step: 12, at: '2026-01-01T00:00:03.000Z' }));
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
    expect(value('haru_domain_last_poll_timestamp_seconds', east)).toBe(Date.parse('2026-01-01T00:00:01.000Z') / 1000);
    expect(value('haru_domain_last_poll_timestamp_seconds', west)).toBe(Date.parse('2026-01-01T00:00:03.000Z') / 1000);
  });
});
