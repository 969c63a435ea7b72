/**
 * The shipped alert rules (deploy/prometheus/haru.rules.yml) in a real Prometheus (Debian's `prometheus`)
 * scraping a running `haru worker` process and the API: the first promotion that fails after the worker started
 * fires HaruFailoverFailed, because the worker exports its failed-promotion counter at 0 from the start, so
 * `increase()` sees the first failure (a counter born at 1 would hide it).
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { copyFileSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { type ChaosApi, startChaosApi } from '../chaos/support/api';
import { type ChaosRig, startChaosRig } from '../chaos/support/rig';
import { freePort } from '../support/ports';
import { describeWithTools, PROMETHEUS } from '../support/tools';
import { MODEL } from '../workflows/support/sim-fleet';
import { eventually, uniqueTaskQueue, useTestServer } from '../workflows/support/temporal';

jest.setTimeout(240_000);

const RULES = path.resolve(__dirname, '../../deploy/prometheus/haru.rules.yml');

interface Alert {
  labels: Record<string, string>;
  state: 'pending' | 'firing';
}

describeWithTools('the shipped alert rules in a real Prometheus', [PROMETHEUS], () => {
  let dir = '';
  let rig: ChaosRig | undefined;
  let api: ChaosApi | undefined;
  let prometheus: ChildProcess | undefined;
  let prometheusLog = '';
  const server = useTestServer(async () => {
    prometheus?.kill('SIGKILL');
    await api?.close();
    await rig?.close();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  it('fires HaruFailoverFailed on the first failed promotion after the worker started', async () => {
    dir = mkdtempSync(path.join(os.tmpdir(), 'haru-prometheus-'));
    const taskQueue = uniqueTaskQueue('prometheus-alerts');
    rig = await startChaosRig({ temporal: server, temporalAddress: process.env.TEMPORAL_TEST_ADDRESS!, taskQueue });
    const { fleet } = rig;
    const slug = fleet.layout.fleet.slug;
    const worker = await rig.startWorker();
    api = await startChaosApi({ databaseUrl: fleet.db.url, temporalAddress: rig.temporalAddress, taskQueue });

    // The shipped rules as they are; scraped and evaluated every second instead of every 15 s.
    copyFileSync(RULES, path.join(dir, 'haru.rules.yml'));
    const target = (url: string) => new URL(url).host;
    writeFileSync(
      path.join(dir, 'prometheus.yml'),
      [
        'global: { scrape_interval: 1s, evaluation_interval: 1s }',
        'rule_files: [haru.rules.yml]',
        'scrape_configs:',
        `  - { job_name: haru-worker, static_configs: [{ targets: ['${target(String(worker.ready.metricsUrl))}'] }] }`,
        `  - { job_name: haru-api, static_configs: [{ targets: ['${target(api.url)}'] }] }`,
        '',
      ].join('\n'),
    );
    const port = await freePort();
    prometheus = spawn(
      'prometheus',
      [
        `--config.file=${path.join(dir, 'prometheus.yml')}`,
        `--storage.tsdb.path=${path.join(dir, 'data')}`,
        `--web.listen-address=127.0.0.1:${port}`,
      ],
      { cwd: dir, stdio: ['ignore', 'pipe', 'pipe'] },
    );
    prometheus.stderr!.on('data', (c: Buffer) => (prometheusLog += c.toString()));
    const base = `http://127.0.0.1:${port}`;
    const query = async (q: string): Promise<{ metric: Record<string, string>; value: [number, string] }[]> => {
      if (prometheus!.exitCode !== null) throw new Error(`prometheus exited:\n${prometheusLog}`);
      const res = await fetch(`${base}/api/v1/query?query=${encodeURIComponent(q)}`).catch(() => null);
      if (!res?.ok) return [];
      return ((await res.json()) as { data: { result: [] } }).data.result;
    };
    const alerts = async (): Promise<Alert[]> =>
      ((await (await fetch(`${base}/api/v1/alerts`)).json()) as { data: { alerts: Alert[] } }).data.alerts;

    // Before any failure: the counter is scraped at 0 for this fleet, and the alert is quiet.
    const failedPromotions = `haru_operations_total{kind="promote",outcome="failed",fleet="${slug}"}`;
    await eventually(
      'Prometheus to scrape the failed-promotion counter at 0',
      async () => (await query(failedPromotions)).some((s) => s.value[1] === '0'),
      60_000,
      250,
    );
    expect((await alerts()).filter((a) => a.labels.alertname === 'HaruFailoverFailed')).toEqual([]);

    // The first promotion after the worker started fails at its probe (the standby answers empty content).
    await fleet.west.sim.faults.set(MODEL, { emptyContentAfterWake: true });
    const { operation } = await rig.promote(fleet.west);
    await eventually(
      'the promotion to fail',
      async () => (await fleet.db.store.operations.get(operation.id))?.state === 'failed',
      120_000,
      100,
    );
    const fired = await eventually(
      'HaruFailoverFailed to fire',
      async () => (await alerts()).find((a) => a.labels.alertname === 'HaruFailoverFailed' && a.state === 'firing'),
      60_000,
      250,
    );
    expect(fired.labels).toMatchObject({ fleet: slug, severity: 'critical' });
  });
});
