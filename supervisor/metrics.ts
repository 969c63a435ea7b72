import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from 'prom-client';
import type { GpuMemory, ModelStatus, TrainingRunStatus } from '../schemas/supervisor';

/**
 * The supervisor's Prometheus metrics, in a registry of their own (several supervisors can live in one test
 * process). `trainingStatus` is read at scrape time.
 */
export function createSupervisorMetrics(opts: { trainingStatus: () => TrainingRunStatus[]; defaults?: boolean }) {
  const registry = new Registry();
  if (opts.defaults) collectDefaultMetrics({ register: registry, prefix: 'haru_supervisor_' });
  const httpRequests = new Counter({
    name: 'haru_supervisor_http_requests_total',
    help: 'HTTP requests answered, by route and status code.',
    labelNames: ['method', 'route', 'status'] as const,
    registers: [registry],
  });
  const httpDuration = new Histogram({
    name: 'haru_supervisor_http_request_duration_seconds',
    help: 'HTTP request duration by route.',
    labelNames: ['method', 'route'] as const,
    buckets: [0.005, 0.05, 0.25, 1, 5, 30, 120],
    registers: [registry],
  });
  const modelAwake = new Gauge({
    name: 'haru_supervisor_model_awake',
    help: 'Last observed model state: 1 awake, 0 asleep, -1 unknown.',
    labelNames: ['model', 'gpu'] as const,
    registers: [registry],
  });
  new Gauge({
    name: 'haru_supervisor_training_running',
    help: 'Training run state per GPU: 0 idle, 1 running, 2 stopping.',
    labelNames: ['gpu'] as const,
    registers: [registry],
    collect() {
      for (const run of opts.trainingStatus()) {
        this.set({ gpu: String(run.gpuIndex) }, run.state === 'idle' ? 0 : run.state === 'running' ? 1 : 2);
      }
    },
  });
  new Gauge({
    name: 'haru_supervisor_training_step',
    help: "The step a GPU's trainer last reported through its progress file (absent until it reports one).",
    labelNames: ['gpu'] as const,
    registers: [registry],
    collect() {
      for (const run of opts.trainingStatus()) {
        if (typeof run.progress?.step === 'number') this.set({ gpu: String(run.gpuIndex) }, run.progress.step);
      }
    },
  });
  const trainingExits = new Counter({
    name: 'haru_supervisor_training_exits_total',
    help: 'Finished training runs, by GPU and how the leader ended (exit code or signal).',
    labelNames: ['gpu', 'how'] as const,
    registers: [registry],
  });
  const gpuQueryErrors = new Counter({
    name: 'haru_supervisor_gpu_query_errors_total',
    help: 'GPU memory queries that failed (tool error, timeout, unparseable output).',
    registers: [registry],
  });
  const gpuUsed = new Gauge({
    name: 'haru_supervisor_gpu_memory_used_mib',
    help: 'GPU memory in use at the last /v1/gpu/memory read, MiB (per GPU; unreadable GPUs are left out).',
    labelNames: ['gpu'] as const,
    registers: [registry],
  });
  const gpuTotal = new Gauge({
    name: 'haru_supervisor_gpu_memory_total_mib',
    help: 'GPU memory size at the last /v1/gpu/memory read, MiB (where the device reports it).',
    labelNames: ['gpu'] as const,
    registers: [registry],
  });
  return {
    registry,
    /** Records the figures of a fresh GPU memory read. */
    observeGpus(gpus: Pick<GpuMemory, 'index' | 'usedMiB' | 'totalMiB'>[]) {
      for (const g of gpus) {
        if (g.usedMiB !== null) gpuUsed.set({ gpu: String(g.index) }, g.usedMiB);
        if (g.totalMiB !== null) gpuTotal.set({ gpu: String(g.index) }, g.totalMiB);
      }
    },
    httpRequests,
    httpDuration,
    trainingExits,
    gpuQueryErrors,
    /** Records the states of a fresh status read. */
    observeModels(models: ModelStatus[]) {
      for (const m of models) {
        modelAwake.set(
          { model: m.name, gpu: String(m.gpuIndex) },
          m.state === 'awake' ? 1 : m.state === 'asleep' ? 0 : -1,
        );
      }
    },
  };
}
export type SupervisorMetrics = ReturnType<typeof createSupervisorMetrics>;
