/**
 * What ships under deploy/prometheus and deploy/grafana, checked against the real tools and the real
 * exporters: the alert rules with `promtool check rules` and `promtool test rules`; the dashboard's
 * queries against a live scrape of the API, the worker, the Temporal SDK runtime and the supervisors after
 * a failover ran; the API's access log lines.
 */
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { createApiMetrics } from '../../api/metrics';
import type { Logger } from '../../lib/logger';
import { parsePrometheusText } from '../../supervisor/prometheus-text';
import { createWorkerMetrics } from '../../workers/metrics';
import { call } from '../api/support/harness';
import { type LiveFleet, startLiveFleet } from '../api/support/live-fleet';
import { freePort } from '../support/ports';
import { describeWithTools, PROMTOOL } from '../support/tools';
import { startWorkerProcess, type WorkerProcess } from '../support/worker-process';
import { eventually, uniqueTaskQueue, useTestServer } from '../workflows/support/temporal';

jest.setTimeout(150_000);

const DEPLOY = path.resolve(__dirname, '../../deploy');

describeWithTools('Prometheus alert rules', [PROMTOOL], () => {
  const promtool = (...args: string[]) =>
    execFileSync('promtool', args, { cwd: path.join(DEPLOY, 'prometheus'), encoding: 'utf8' });

  it('are valid rules, and a valid scrape configuration loads them', () => {
    expect(promtool('check', 'rules', 'haru.rules.yml')).toContain('SUCCESS: 11 rules found');
    expect(promtool('check', 'config', 'prometheus.yml')).toContain('SUCCESS');
  });

  it("each fire on the series that should raise them and stay quiet before (promtool's unit tests)", () => {
    expect(promtool('test', 'rules', 'haru.rules.test.yml')).toContain('SUCCESS');
  });
});

describe('the alert rules on a vanished target', () => {
  it('watch with absent() series the worker and the API each export from their start, before any event', async () => {
    const rules = readFileSync(path.join(DEPLOY, 'prometheus/haru.rules.yml'), 'utf8');
    const watched = [...rules.matchAll(/absent\((haru_[a-z0-9_]+)\)/g)].map((m) => m[1]!).sort();
    expect(watched).toEqual(['haru_proxy_held_requests', 'haru_worker_watch_shards']);
    const fresh = [
      ...parsePrometheusText(await createWorkerMetrics().registry.metrics()),
      ...parsePrometheusText(await createApiMetrics().registry.metrics()),
    ];
    for (const name of watched) expect([name, fresh.some((s) => s.name === name)]).toEqual([name, true]);
  });
});

/**
 * The series a Prometheus text exposition declares (`# TYPE`: a labelled series is declared before its
 * first sample), a histogram's with its `_bucket`, `_sum` and `_count`, and every series with a sample.
 */
const exportedBy = (text: string): Set<string> => {
  const names = new Set<string>();
  for (const line of text.split('\n')) {
    const type = /^# TYPE (\S+) (\S+)/.exec(line);
    if (type) {
      names.add(type[1]!);
      if (type[2] === 'histogram') for (const s of ['_bucket', '_sum', '_count']) names.add(`${type[1]}${s}`);
    } else if (line && !line.startsWith('#')) names.add(line.split(/[{\s]/)[0]!);
  }
  return names;
};

/** The series names the dashboard's queries read (`haru_*`, `temporal_*`). */
function dashboardSeries(): string[] {
  const dashboard = JSON.parse(readFileSync(path.join(DEPLOY, 'grafana/haru.json'), 'utf8')) as {
    panels: { targets: { expr: string }[] }[];
    templating: { list: { query?: string | object }[] };
  };
  const exprs = [
    ...dashboard.panels.flatMap((p) => p.targets.map((t) => t.expr)),
    ...dashboard.templating.list.flatMap((v) => (typeof v.query === 'string' ? [v.query] : [])),
  ];
  return [...new Set(exprs.flatMap((e) => e.match(/\b(?:haru|temporal)_[a-z0-9_]+/g) ?? []))].sort();
}

describe('a failover seen through the exporters', () => {
  const lines: Record<string, unknown>[] = [];
  const logger: Logger = {
    debug() {},
    info: (msg, fields) => lines.push({ msg, ...fields }),
    warn() {},
    error() {},
  };
  const workerMetrics = createWorkerMetrics();
  let live: LiveFleet;
  let sdkWorker: WorkerProcess | undefined;
  let sdkMetricsUrl: string;
  const server = useTestServer(async () => {
    await sdkWorker?.stop();
    await live?.close();
  });

  beforeAll(async () => {
    live = await startLiveFleet(server, { logger, workerMetrics });
    const sdkPort = await freePort();
    sdkMetricsUrl = `http://127.0.0.1:${sdkPort}/metrics`;
    // The production entry point on a task queue of its own: its SDK runtime exports `temporal_*`.
    sdkWorker = await startWorkerProcess({
      databaseUrl: live.fleet.db.url,
      taskQueue: uniqueTaskQueue('sdk-metrics'),
      env: { HARU_WORKER_METRICS_HOST: '127.0.0.1', HARU_WORKER_SDK_METRICS_PORT: String(sdkPort) },
    });
    const promote = await call(`${live.url}/v1/fleets/${live.slug}/promote`, {
      body: { targetDomainId: 'west', reason: 'observability test' },
    });
    expect(promote.status).toBe(202);
    await eventually(
      'the promotion to succeed',
      async () =>
        (await call(`${live.url}/v1/fleets/${live.slug}/operations/${promote.body.operation.id}`)).body.state ===
        'succeeded',
      90_000,
      200,
    );
  });

  it("names in every dashboard query only series Haru's processes export", async () => {
    const exported = new Set<string>();
    const add = (text: string) => exportedBy(text).forEach((n) => exported.add(n));
    add(await (await fetch(`${live.url}/metrics`)).text());
    add(await workerMetrics.registry.metrics());
    for (const d of [live.fleet.east, live.fleet.west]) add(await (await fetch(`${d.supervisorUrl}/metrics`)).text());
    add(await eventually('the SDK metrics', async () => (await fetch(sdkMetricsUrl)).text()));
    const missing = dashboardSeries().filter((name) => !exported.has(name));
    expect(missing).toEqual([]);
    expect(dashboardSeries().length).toBeGreaterThan(15);
  });

  it('labels fleet series with the slug, never the id', async () => {
    const text = `${await (await fetch(`${live.url}/metrics`)).text()}\n${await workerMetrics.registry.metrics()}`;
    const fleets = new Set([...text.matchAll(/[{,]fleet="([^"]+)"/g)].map((m) => m[1]));
    expect([...fleets]).toEqual([live.slug]);
    expect(text).toContain(`haru_active_domain{fleet="${live.slug}",domain="west"} 1`);
    expect(text).toContain(`haru_domain_state{fleet="${live.slug}",domain="east",state="ready"} 1`);
    expect(text).toMatch(
      new RegExp(`haru_operations_total\\{fleet="${live.slug}",kind="promote",outcome="succeeded"\\} 1`),
    );
    expect(text).toMatch(
      new RegExp(`haru_worker_routing_commits_total\\{fleet="${live.slug}",outcome="committed"\\} 1`),
    );
    expect(text).toMatch(new RegExp(`haru_model_awake\\{fleet="${live.slug}",domain="west",model="llama-1b"\\} 1`));
    // West trained until its promotion: the step its trainer had reported at the monitor's last poll of it.
    expect(text).toMatch(new RegExp(`haru_training_step\\{fleet="${live.slug}",domain="west",gpu="0"\\} [1-9]\\d*\n`));
    // And those seconds were the standby's harvest: its training GPU's time between the monitor's polls.
    expect(text).toMatch(
      new RegExp(
        `haru_standby_gpu_seconds_total\\{fleet="${live.slug}",domain="west",use="training"\\} (0\\.\\d*[1-9]|[1-9])`,
      ),
    );
  });

  it('writes one access log line per request with route, status, duration, fleet and domain', async () => {
    lines.length = 0;
    await call(`${live.url}/v1/fleets/${live.slug}/health`);
    const chat = await fetch(`${live.url}/v1/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-haru-fleet': live.slug },
      body: JSON.stringify({ model: 'llama-1b', messages: [{ role: 'user', content: 'hi' }], max_tokens: 4 }),
    });
    expect(chat.status).toBe(200);
    await chat.text();
    const requests = await eventually('two access lines', () => {
      const r = lines.filter((l) => l.msg === 'request');
      return r.length >= 2 ? r : null;
    });
    expect(requests).toEqual([
      expect.objectContaining({
        method: 'GET',
        route: '/v1/fleets/:fleet/health',
        status: '200',
        fleet: live.slug,
        domain: null,
        durationMs: expect.any(Number),
      }),
      expect.objectContaining({
        method: 'POST',
        route: '/v1/chat/completions',
        status: '200',
        fleet: live.slug,
        domain: 'west',
        durationMs: expect.any(Number),
      }),
    ]);
  });
});
