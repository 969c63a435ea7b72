import type { ActivityInterceptorsFactory } from '@temporalio/worker';
import { Counter, collectDefaultMetrics, Gauge, Histogram, Registry } from 'prom-client';
import type { ActivityMetrics, HostObservation } from '../activities/deps';
import { sightingOf } from '../core/sighting';
import { STANDBY_GPU_USES, standbyGpuSeconds, type StandbySample, standbySample } from '../core/standby-harvest';
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

/** A domain as this worker's last recorded poll of it left it (`hostObserved`), with its host's last answer. */
interface WatchedHost extends Omit<HostObservation, 'status'> {
  labels: { fleet: string; domain: string };
  lastStatus: HostObservation['status'];
  /** The last poll, if it was an answer while the domain was a standby: where the next one's harvest counts from. */
  standbySample: StandbySample | null;
}

/**
 * Creates the metrics; `withDefaults` adds the process metrics (main.ts only, to keep tests light), `now` is the
 * clock a scrape judges sightings by (the worker's own, which stamped them).
 */
export function createWorkerMetrics(opts: { withDefaults?: boolean; now?: () => Date } = {}): WorkerMetrics {
  const now = opts.now ?? (() => new Date());
  // Per domain, what the host last said and when it was last heard. The host's series are written from it at
  // each scrape: a host's report is shown only while it is current (heard within the stale limit, not failed),
  // so a dead host's models do not stay awake on a dashboard, whether its polls fail, stop (a blind round, a
  // shard handed to another worker) or its domain was marked failed.
  const hosts = new Map<string, WatchedHost>();
  const currentHosts = () => {
    const at = now();
    return [...hosts.values()].filter(
      (h) => h.lastStatus !== null && sightingOf(h, h.staleAfterMs, at).isReportCurrent,
    );
  };
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
  new Gauge({
    name: 'haru_model_awake',
    help: "A model's state at the monitor's last poll of a host heard within its stale limit and not failed: 1 awake, 0 asleep, -1 unknown (no series once the host is stale or failed)",
    labelNames: ['fleet', 'domain', 'model'],
    registers,
    collect() {
      this.reset();
      for (const h of currentHosts())
        for (const m of h.lastStatus!.models)
          this.set({ ...h.labels, model: m.name }, m.state === 'awake' ? 1 : m.state === 'asleep' ? 0 : -1);
    },
  });
  new Gauge({
    name: 'haru_training_state',
    help: "A training run's state at the monitor's last poll of a host heard within its stale limit and not failed: 0 idle, 1 running, 2 stopping",
    labelNames: ['fleet', 'domain', 'gpu'],
    registers,
    collect() {
      this.reset();
      for (const h of currentHosts())
        for (const t of h.lastStatus!.training)
          this.set({ ...h.labels, gpu: String(t.gpuIndex) }, t.state === 'idle' ? 0 : t.state === 'running' ? 1 : 2);
    },
  });
  new Gauge({
    name: 'haru_training_step',
    help: "The step a training run's trainer had reported at the monitor's last poll of a host heard within its stale limit and not failed",
    labelNames: ['fleet', 'domain', 'gpu'],
    registers,
    collect() {
      this.reset();
      for (const h of currentHosts())
        for (const t of h.lastStatus!.training)
          if (typeof t.progress?.step === 'number') this.set({ ...h.labels, gpu: String(t.gpuIndex) }, t.progress.step);
    },
  });
  const standbyGpuSecondsTotal = new Counter({
    name: 'haru_standby_gpu_seconds_total',
    help: "A standby's training GPUs' time between the monitor's answered polls of it, by use (training: a run was running at the earlier poll; idle: none was): the harvest of the standby's GPUs",
    labelNames: ['fleet', 'domain', 'use'],
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
  new Gauge({
    name: 'haru_domain_last_poll_timestamp_seconds',
    help: "When the monitor last heard the domain's supervisor: the worker's receive time of the last answer that counted as a sighting (Unix seconds)",
    labelNames: ['fleet', 'domain'],
    registers,
    collect() {
      this.reset();
      for (const h of hosts.values()) if (h.lastSeenAt !== null) this.set(h.labels, Date.parse(h.lastSeenAt) / 1000);
    },
  });
  // The poll counter is bumped at every poll (hundreds a second): each labelled child is looked up once,
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
        for (const { slug: domain } of domains) {
          for (const outcome of POLL_OUTCOMES) pollsOf({ fleet, domain, outcome }).inc(0);
          for (const use of STANDBY_GPU_USES) standbyGpuSecondsTotal.inc({ fleet, domain, use }, 0);
        }
      }
    },
    knowActivityTypes(types) {
      for (const activity of types) for (const outcome of EXECUTION_OUTCOMES) executions.inc({ activity, outcome }, 0);
    },
    hostObserved(labels, { status, ...observed }) {
      const key = `${labels.fleet}\u0000${labels.domain}`;
      const previous = hosts.get(key);
      const lastStatus = status ?? previous?.lastStatus ?? null;
      // Counted from answer to answer while the domain is a standby; a poll unanswered, or in another role,
      // starts the count again at the next answer.
      const sample =
        status !== null && observed.role === 'standby' && observed.answeredAt !== null
          ? standbySample(status, Date.parse(observed.answeredAt))
          : null;
      if (sample && previous?.standbySample) {
        const spent = standbyGpuSeconds(previous.standbySample, sample, observed.staleAfterMs);
        for (const use of STANDBY_GPU_USES)
          if (spent[use] > 0) standbyGpuSecondsTotal.inc({ ...labels, use }, spent[use]);
      }
      hosts.set(key, { labels, ...observed, lastStatus, standbySample: sample });
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
