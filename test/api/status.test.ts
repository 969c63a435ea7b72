/**
 * `haru fleet health` and `haru domain status` against a running stack: real supervisors of a simulated
 * fleet, the worker and its monitor on the dev server, the API over HTTP, and the `haru` command.
 */
import { fleetHealthResponseSchema, domainStatusResponseSchema } from '../../schemas/status';
import { runCli } from '../support/cli';
import { useTestServer } from '../workflows/support/temporal';
import { type LiveFleet, startLiveFleet } from './support/live-fleet';

jest.setTimeout(120_000);

let live: LiveFleet;
const server = useTestServer(async () => {
  await live?.close();
});
beforeAll(async () => {
  live = await startLiveFleet(server);
});
const haru = (...args: string[]) => runCli(args, { HARU_URL: live.url, HARU_API_TOKEN: '' });

it("fleet health shows each domain's last poll with its age and the monitor's look, fresh, in json and as a table", async () => {
  const json = await haru('fleet', 'health', live.slug, '-o', 'json');
  expect(json).toMatchObject({ code: 0, stderr: '' });
  const health = fleetHealthResponseSchema.parse(JSON.parse(json.stdout));
  expect(health.fleetSlug).toBe(live.slug);
  expect(health.domains.map((d) => [d.slug, d.isActive])).toEqual([
    ['east', true],
    ['west', false],
  ]);
  for (const d of health.domains) {
    expect(d.lastSeenAt).not.toBeNull();
    expect(d.lastSeenAgeMs).toBe(Date.parse(health.at) - Date.parse(d.lastSeenAt!));
  }
  expect(health.monitor).toMatchObject({ fleetId: live.fleet.fleetId, activeDomainId: live.fleet.east.id });
  expect(health.monitorLook).toMatchObject({ checkedAt: health.monitor!.checkedAt, isStale: false });
  expect(health.monitorLook.ageMs).toBe(Date.parse(health.at) - Date.parse(health.monitor!.checkedAt));

  const text = await haru('fleet', 'health', live.slug);
  expect(text.code).toBe(0);
  expect(text.stdout).toMatch(/monitor looked .* ago/);
  expect(text.stdout).not.toContain('STALE');
  expect(text.stdout).toMatch(/^east\s+active\s+ready\s+healthy\s+\S+ ago\s/m);
  const wide = await haru('fleet', 'health', live.slug, '-o', 'wide');
  expect(wide.stdout).toMatch(/^DOMAIN +ROLE +STATE +MONITOR SAYS +LAST HEARD +LAST HEARD AT +FAILURES/m);
  expect(wide.stdout).toMatch(/^east\s+active\s+ready\s+healthy\s+\S+ ago\s+\d{4}-\d\d-\d\dT\S+Z\s+0/m);
  expect(text.stdout).toMatch(/^west\s+standby\s+ready\s+healthy/m);
});

it("fleet health says STALE once the monitor's last look is older than a checkpoint plus heartbeatStaleMs", async () => {
  // A terminated monitor still answers its query with its last look, which only ages from then on.
  await server.client.workflow.getHandle(`haru/${live.fleet.fleetId}/monitor`).terminate('monitor gone');
  live.advanceApiClock(2 * 60_000);
  const json = fleetHealthResponseSchema.parse(JSON.parse((await haru('fleet', 'health', live.slug, '--json')).stdout));
  expect(json.monitorLook).toMatchObject({ checkedAt: json.monitor!.checkedAt, isStale: true, staleAfterMs: 63_000 });
  expect(json.monitorLook.ageMs).toBeGreaterThan(120_000);
  const text = await haru('fleet', 'health', live.slug);
  expect(text.code).toBe(0);
  expect(text.stdout).toMatch(/monitor looked 2m\d\ds ago .*: STALE \(older than 1m03s; is the monitor polling\?\)/);
  live.advanceApiClock(-2 * 60_000);
});

it("domain status shows each model's state, the training run with its reported progress and GPU memory per GPU from the host now", async () => {
  const json = await haru('domain', 'status', live.slug, 'west', '-o', 'json');
  expect(json).toMatchObject({ code: 0, stderr: '' });
  const status = domainStatusResponseSchema.parse(JSON.parse(json.stdout));
  expect(status.domain).toMatchObject({ slug: 'west', state: 'ready', isActive: false });
  expect(status.host.isReachable).toBe(true);
  expect(status.host.models.map((m) => [m.name, m.gpuIndex, m.state])).toEqual([['llama-1b', 0, 'asleep']]);
  expect(status.host.training).toHaveLength(1);
  expect(status.host.training[0]).toMatchObject({ gpuIndex: 0, state: 'running' });
  expect(status.host.training[0]!.runningForMs).toBeGreaterThanOrEqual(0);
  // The simulated trainer reports each step through $HARU_TRAINING_PROGRESS_FILE, as a real one does.
  const progress = status.host.training[0]!.progress;
  expect(progress).toMatchObject({ totalSteps: null, error: null });
  expect(progress!.step).toBeGreaterThan(0);
  expect(progress!.loss).toBeCloseTo(2 / (1 + progress!.step! / 100));
  expect(progress!.ageMs).toBeGreaterThanOrEqual(0);
  expect(status.host.gpus.map((g) => g.index)).toEqual([0]);
  expect(status.host.gpus[0]!.usedMiB).toBeGreaterThan(0);

  const text = await haru('domain', 'status', live.slug, 'east');
  expect(text.code).toBe(0);
  expect(text.stdout).toContain(`domain east of fleet ${live.slug}: ready (active)`);
  expect(text.stdout).toMatch(/^llama-1b\s+0\s+awake/m);
  expect(text.stdout).toMatch(/^0\s+[\d.]+\s+[\d.]+\s+device/m);
  const west = await haru('domain', 'status', live.slug, 'west');
  expect(west.stdout).toMatch(/^TRAINING GPU\s+STATE\s+PIDS\s+RUNNING FOR\s+PROGRESS\s+RESTARTS/m);
  expect(west.stdout).toMatch(/^0\s+running\s+[\d,]+\s+\S+\s+\d+ loss [\d.]+ \([\d.]+m?s ago\)\s+0/m);
});

it('domain status of a dead host answers with the host unreachable, and an unknown domain is domain_not_found', async () => {
  await live.fleet.west.sim.kill();
  const status = domainStatusResponseSchema.parse(
    JSON.parse((await haru('domain', 'status', live.slug, 'west', '--json')).stdout),
  );
  expect(status.host).toMatchObject({ isReachable: false, models: [], gpus: [] });
  expect(status.host.error).toMatch(/.+/);
  const text = await haru('domain', 'status', live.slug, 'west');
  expect(text.stdout).toContain('host: UNREACHABLE now');

  const unknown = await haru('domain', 'status', live.slug, 'nowhere');
  expect(unknown.code).toBe(1);
  expect(unknown.stderr).toContain('domain nowhere is not in fleet');
});
