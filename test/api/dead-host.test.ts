/**
 * A host that died, as every view shows it, on a running stack: real supervisors of a simulated fleet, the
 * worker with its metrics and the monitor on the dev server, the API over HTTP and the `haru` command. Once the
 * active's host is killed and the fleet failed over, nothing shows it serving or awake, and every age of it
 * (the monitor's `health`, `haru fleet health`, `haru fleet status`, the worker's metrics) is taken from the one
 * time the watcher last heard it.
 */
import { fleetStatusSchema } from '../../schemas/api';
import { fleetHealthResponseSchema } from '../../schemas/status';
import { parsePrometheusText } from '../../supervisor/prometheus-text';
import { createWorkerMetrics } from '../../workers/metrics';
import { runCli } from '../support/cli';
import { eventually, useTestServer } from '../workflows/support/temporal';
import { call } from './support/harness';
import { type LiveFleet, startLiveFleet } from './support/live-fleet';

jest.setTimeout(150_000);

const workerMetrics = createWorkerMetrics();
let live: LiveFleet;
const server = useTestServer(async () => {
  await live?.close();
});
beforeAll(async () => {
  live = await startLiveFleet(server, { workerMetrics });
});
const haru = (...args: string[]) => runCli(args, { HARU_URL: live.url, HARU_API_TOKEN: '' });
const fleetStatus = async () => fleetStatusSchema.parse((await call(`${live.url}/v1/fleets/${live.slug}`)).body);
const fleetHealth = async () =>
  fleetHealthResponseSchema.parse((await call(`${live.url}/v1/fleets/${live.slug}/health`)).body);
/** The worker's samples of `name` whose labels include `labels`. */
const samples = async (name: string, labels: Record<string, string>) =>
  parsePrometheusText(await workerMetrics.registry.metrics()).filter(
    (s) => s.name === name && Object.entries(labels).every(([k, v]) => s.labels[k] === v),
  );

it('shows a dead active as failed and silent since it was last heard, its slots unknown and its models off the gauges', async () => {
  const east = { fleet: live.slug, domain: 'east' };
  const eastAwake = () => samples('haru_model_awake', { ...east, model: 'llama-1b' });
  await eventually('east awake on the gauge', async () => (await eastAwake())[0]?.value === 1);

  const killedAtMs = Date.now();
  await live.fleet.east.sim.kill();
  await eventually('routing on west', async () => (await fleetStatus()).activeDomainId === live.fleet.west.id, 90_000);
  // The monitor's own look (checkNow): the look that once re-dated a silent host's sighting to its own start.
  const reconciled = await call(`${live.url}/v1/fleets/${live.slug}/reconcile`, { body: {} });
  expect(reconciled.status).toBe(200);

  const stored = (await fleetStatus()).domains.find((d) => d.slug === 'east')!;
  expect(stored.state).toBe('failed');
  expect(stored.sighting).toMatchObject({ lastSeenAt: stored.lastSeenAt, isReportCurrent: false });
  expect(Date.parse(stored.lastSeenAt!)).toBeLessThanOrEqual(killedAtMs + 1_000);

  // The monitor's health: the same sighting, aged to its look; at least the time since the kill.
  const health = await fleetHealth();
  const assessed = health.monitor!.domains.find((d) => d.slug === 'east')!;
  expect(Date.parse(health.monitor!.checkedAt)).toBeGreaterThanOrEqual(Date.parse(reconciled.body.signalledAt));
  expect(assessed.lastSeenAt).toBe(stored.lastSeenAt);
  expect(assessed.heartbeatAgeMs).toBe(Date.parse(health.monitor!.checkedAt) - Date.parse(stored.lastSeenAt!));
  expect(assessed.heartbeatAgeMs).toBeGreaterThanOrEqual(Date.parse(health.monitor!.checkedAt) - killedAtMs - 1_000);

  // The worker's metrics: when east was last heard is the same time; its models are gone from the gauges.
  expect((await samples('haru_domain_last_poll_timestamp_seconds', east))[0]?.value).toBe(
    Date.parse(stored.lastSeenAt!) / 1000,
  );
  expect(await eastAwake()).toEqual([]);
  expect(await samples('haru_training_state', east)).toEqual([]);
  expect((await samples('haru_model_awake', { ...east, domain: 'west', model: 'llama-1b' }))[0]?.value).toBe(1);

  // haru fleet status: east failed, heard long ago (once past the fleet's stale limit: a failover can be
  // quicker than that), no slot serving.
  await eventually(
    'east stale',
    async () => (await fleetStatus()).domains.find((d) => d.slug === 'east')!.sighting.isStale,
    30_000,
  );
  const status = await haru('fleet', 'status', live.slug);
  expect(status.code).toBe(0);
  const eastRow = status.stdout.split('\n').find((l) => l.startsWith('east '))!;
  expect(eastRow).toMatch(/^east\s+failed\s+failed\s+\S+\s+\S+ ago STALE\s+gpu0:unknown\[llama-1b\]/);
  expect(eastRow).not.toContain('serving');
  expect(status.stdout).toMatch(/^west\s+active\s+ready\s+\S+\s+\S+ ago\s+gpu0:serving\[llama-1b\]/m);

  // haru fleet health, 166 s on: east's age is the time since it was last heard, at the answer.
  live.advanceApiClock(166_000);
  try {
    const json = fleetHealthResponseSchema.parse(
      JSON.parse((await haru('fleet', 'health', live.slug, '--json')).stdout),
    );
    const polled = json.domains.find((d) => d.slug === 'east')!;
    expect(polled).toMatchObject({ lastSeenAt: stored.lastSeenAt, isStale: true });
    expect(polled.lastSeenAgeMs).toBe(Date.parse(json.at) - Date.parse(stored.lastSeenAt!));
    expect(polled.lastSeenAgeMs).toBeGreaterThan(166_000);
    const text = await haru('fleet', 'health', live.slug);
    expect(text.stdout).toMatch(/^east\s+failed\s+failed\s+failed .* [23]m\d\ds ago STALE/m);
  } finally {
    live.advanceApiClock(-166_000);
  }
});
