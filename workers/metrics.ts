import type { ActivityInterceptorsFactory } from '@temporalio/worker';
import { Counter, collectDefaultMetrics, Gauge, Histogram, Registry } from 'prom-client';
import type { ActivityMetrics } from '../activities/deps';
import { OPERATION_KINDS, type OperationState } from '../schemas/enums';

/** A fleet as its series name it: `fleet` is the slug, `domain` each domain's slug. */
export interface FleetLabels {
  slug: string;
  domains: readonly { slug: string }[];
}

// The label values each counter can take, written at 0 before the first event (`knowFleets`).
type Outcome<K extends 'routingCommit' | 'domainPolled'> = Parameters<ActivityMetrics[K]>[0]['outcome'];
const OPERATION_OUTCOMES = ['succeeded', 'failed', 'cancelled'] as const satisfies readonly OperationState[];
const COMMIT_OUTCOMES = [
  'committed',
  'already_committed',
  'conflict',
] as const satisfies readonly Outcome<'routingCommit'>[];
const POLL_OUTCOMES = ['ok', 'error'] as const satisfies readonly Outcome<'domainPolled'>[];
const EXECUTION_OUTCOMES = ['ok', 'failed', 'cancelled'] as const;

/** The worker's Prometheus metrics, on a registry of their own. */
export interface WorkerMetrics extends ActivityMetrics {
  registry: Registry;
  /** Activity interceptor counting executions and timing them by activity type and outcome. */
  activityInterceptor: ActivityInterceptorsFactory;
  /**
   * Writes every counter series of these fleets at 0 (operations by kind and outcome, routing commits by outcome,
   * polls by domain and outcome) unless it exists: `increase()` and `rate()` see no increase in a series whose
   * first sample is already 1, so the first failed promotion would raise no alert. Called with the store's
   * fleets when the worker starts and at each keeper round (a fleet created since).
   */
  knowFleets(fleets: readonly FleetLabels[]): void;
  /** Writes the execution counters of these activity types at 0 for each outcome (the worker registers them). */
  knowActivityTypes(types: readonly string[]): void;
}

/** Creates the metrics; `withDefaults` adds the process metrics (main.ts only, to keep tests light). */
export function createWorkerMetrics(opts: { withDefaults?: boolean } = {}): WorkerMetrics {
  const registry = new Registry();
  if (opts.withDefaults) collectDefaultMetrics({ register: registry });
  const registers = [registry];
  const executions = new Counter({
    name: 'haru_worker_activity_executions_total',
    help: 'Activity attempts by activity type and outcome (ok, failed, cancelled)',
    labelNames: ['activity', 'outcome'],
    registers,
  });
  const duration = new Histogram({
    name: 'haru_worker_activity_duration_seconds',
    help: 'Activity attempt duration by activity type',
    labelNames: ['activity'],
    buckets: [0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300],
    registers,
  });
  const polls = new Counter({
    name: 'haru_worker_domain_polls_total',
    help: 'Supervisor polls by the fleet monitor, by fleet, domain and outcome',
    labelNames: ['fleet', 'domain', 'outcome'],
    registers,
  });
  const commits = new Counter({
    name: 'haru_worker_routing_commits_total',
    help: 'Routing CAS attempts by fleet and outcome (committed, already_committed, conflict)',
    labelNames: ['fleet', 'outcome'],
    registers,
  });
  const operations = new Counter({
    name: 'haru_operations_total',
    help: 'Operations ended, by fleet, kind and outcome (succeeded, failed, cancelled)',
    labelNames: ['fleet', 'kind', 'outcome'],
    registers,
  });
  const operationDuration = new Histogram({
    name: 'haru_operation_duration_seconds',
    help: 'Operation duration from start to end, by fleet, kind and outcome',
    labelNames: ['fleet', 'kind', 'outcome'],
    buckets: [1, 2.5, 5, 10, 20, 30, 60, 120, 300, 600],
    registers,
  });
  const stepDuration = new Histogram({
    name: 'haru_operation_step_duration_seconds',
    help: 'Successful step duration (all its attempts), by fleet and step',
    labelNames: ['fleet', 'step'],
    buckets: [0.1, 0.25, 0.5, 1, 2.5, 5, 10, 20, 30, 60, 120],
    registers,
  });
  const modelAwake = new Gauge({
    name: 'haru_model_awake',
    help: "A model's state at the monitor's last successful poll: 1 awake, 0 asleep, -1 unknown",
    labelNames: ['fleet', 'domain', 'model'],
    registers,
  });
  const trainingState = new Gauge({
    name: 'haru_training_state',
    help: "A training run's state at the monitor's last successful poll: 0 idle, 1 running, 2 stopping",
    labelNames: ['fleet', 'domain', 'gpu'],
    registers,
  });
  const trainingStep = new Gauge({
    name: 'haru_training_step',
    help: "The step a training run's trainer had reported at the monitor's last successful poll",
    labelNames: ['fleet', 'domain', 'gpu'],
    registers,
  });
  const shardsHeld = new Gauge({
    name: 'haru_worker_watch_shards',
    help: 'Watch shards this worker holds now (each worker hands shards on above its share)',
    registers,
  });
  const watcherBlind = new Gauge({
    name: 'haru_worker_fleet_watcher_blind',
    help: "1 while this worker's last round of a fleet saw none of its domains (its failures held against none)",
    labelNames: ['fleet'],
    registers,
  });
  const lastPoll = new Gauge({
    name: 'haru_domain_last_poll_timestamp_seconds',
    help: "When the monitor last polled the domain's supervisor successfully (Unix seconds)",
    labelNames: ['fleet', 'domain'],
    registers,
  });
  // The monitor's series are set at every poll (hundreds a second): each labelled child is looked up once,
  // not validated and hashed by prom-client at every set.
  const childrenOf = <C>(labelNames: readonly string[], make: (labels: Record<string, string>) => C) => {
    const children = new Map<string, C>();
    return (labels: Record<string, string>): C => {
      const key = labelNames.map((name) => labels[name]).join('\u0000');
      let child = children.get(key);
      if (child === undefined) children.set(key, (child = make(labels)));
      return child;
    };
  };
  const pollsOf = childrenOf(['fleet', 'domain', 'outcome'], (l) => polls.labels(l));
  const lastPollOf = childrenOf(['fleet', 'domain'], (l) => lastPoll.labels(l));
  const modelAwakeOf = childrenOf(['fleet', 'domain', 'model'], (l) => modelAwake.labels(l));
  const trainingStateOf = childrenOf(['fleet', 'domain', 'gpu'], (l) => trainingState.labels(l));
  const trainingStepOf = childrenOf(['fleet', 'domain', 'gpu'], (l) => trainingStep.labels(l));
  return {
    registry,
    domainPolled: (labels) => pollsOf(labels).inc(),
    watchShardsHeld: (held) => shardsHeld.set(held),
    watcherBlind: (labels, isBlind) => watcherBlind.set(labels, isBlind ? 1 : 0),
    routingCommit: (labels) => commits.inc(labels),
    operationFinished(labels, seconds) {
      operations.inc(labels);
      operationDuration.observe(labels, seconds);
    },
    stepSucceeded: (labels, seconds) => stepDuration.observe(labels, seconds),
    knowFleets(fleets) {
      for (const { slug: fleet, domains } of fleets) {
        for (const kind of OPERATION_KINDS)
          for (const outcome of OPERATION_OUTCOMES) operations.inc({ fleet, kind, outcome }, 0);
        for (const outcome of COMMIT_OUTCOMES) commits.inc({ fleet, outcome }, 0);
        for (const { slug: domain } of domains)
          for (const outcome of POLL_OUTCOMES) pollsOf({ fleet, domain, outcome }).inc(0);
      }
    },
    knowActivityTypes(types) {
      for (const activity of types) for (const outcome of EXECUTION_OUTCOMES) executions.inc({ activity, outcome }, 0);
    },
    hostObserved(labels, status) {
      lastPollOf(labels).set(Date.parse(status.at) / 1000);
      for (const m of status.models)
        modelAwakeOf({ ...labels, model: m.name }).set(m.state === 'awake' ? 1 : m.state === 'asleep' ? 0 : -1);
      for (const t of status.training) {
        const gpu = { ...labels, gpu: String(t.gpuIndex) };
        trainingStateOf(gpu).set(t.state === 'idle' ? 0 : t.state === 'running' ? 1 : 2);
        if (typeof t.progress?.step === 'number') trainingStepOf(gpu).set(t.progress.step);
      }
    },
    activityInterceptor: (ctx) => ({
      inbound: {
        async execute(input, next) {
          const activity = ctx.info.activityType;
          const end = duration.startTimer({ activity });
          try {
            const result = await next(input);
            executions.inc({ activity, outcome: 'ok' });
            return result;
          } catch (err) {
            executions.inc({ activity, outcome: ctx.cancellationSignal.aborted ? 'cancelled' : 'failed' });
            throw err;
          } finally {
            end();
          }
        },
      },
    }),
  };
}
