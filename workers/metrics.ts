import type { ActivityInterceptorsFactory } from '@temporalio/worker';
import { Counter, collectDefaultMetrics, Histogram, Registry } from 'prom-client';
import type { ActivityMetrics } from '../activities/deps';

/** The worker's Prometheus metrics, on a registry of their own. */
export interface WorkerMetrics extends ActivityMetrics {
  registry: Registry;
  /** Activity interceptor counting executions and timing them by activity type and outcome. */
  activityInterceptor: ActivityInterceptorsFactory;
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
  return {
    registry,
    domainPolled: (labels) => polls.inc(labels),
    routingCommit: (labels) => commits.inc(labels),
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
