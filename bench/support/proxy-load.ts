import autocannon from 'autocannon';
import { cpuMs } from './cpu';
import { mean, percentile } from './stats';

/** The processes on a request's path whose CPU time is counted per request. */
export interface Pids {
  upstream: number;
  proxy: number[];
}

/**
 * Runs autocannon (in this process, which does nothing else meanwhile) and counts the CPU time the load
 * generator, the proxy and the upstream spent per request: on a machine with few cores that, not the
 * network, is what bounds throughput.
 */
export async function load(url: string, body: string, connections: number, durationS: number, pids: Pids) {
  const before = { self: process.cpuUsage(), upstream: cpuMs(pids.upstream), proxy: pids.proxy.map(cpuMs) };
  const run = autocannon({
    url,
    connections,
    duration: durationS,
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body,
  });
  // Each 2xx response's time in ms with the fraction (autocannon's histogram truncates to whole ms).
  const times: number[] = [];
  // `on` returns the run itself (a thenable), which is awaited below.
  void run.on('response', (_client: unknown, status: number, _bytes: number, ms: number) => {
    if (status >= 200 && status < 300) times.push(ms);
  });
  const r = await run;
  const self = process.cpuUsage(before.self);
  const total = r.requests.total || 1;
  const proxyMs = pids.proxy.reduce((n, pid, i) => n + cpuMs(pid) - before.proxy[i]!, 0);
  return {
    connections,
    rps: r.requests.average,
    p50: percentile(times, 50),
    p99: percentile(times, 99),
    mean: mean(times),
    /** autocannon's own figures, from a histogram of whole milliseconds (kept for comparison). */
    autocannon: { p50: r.latency.p50, p99: r.latency.p99, mean: r.latency.mean },
    errors: r.errors + r.timeouts,
    non2xx: r.non2xx,
    cpuPerRequestMs: {
      loadGenerator: (self.user + self.system) / 1000 / total,
      proxy: pids.proxy.length ? proxyMs / total : 0,
      upstream: (cpuMs(pids.upstream) - before.upstream) / total,
    },
  };
}
