/**
 * The pure parts of `haru dev`: its environment, the layout it generates, the port plan and busy-port
 * message, the process registry that cleans up after a crashed run, and the banner's commands.
 */
import { spawn } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { renderBanner, type BannerInfo } from '../../cli/dev/banner';
import { manageChild, signalGroup } from '../../cli/dev/children';
import { simSupervisorToken } from '../../cli/commands/sim';
import { loadDevConfig } from '../../cli/dev/config';
import { configureDevStack } from '../../cli/dev/configure';
import { sdkTelemetry } from '../../workers/main';
import { simDomainArgs, simDomainEnv } from '../../cli/dev/domains';
import { buildDevLayout, simulatorPorts } from '../../cli/dev/layout';
import { assertPortsFree, duplicatePorts, planPorts, PortInUseError } from '../../cli/dev/ports';
import { createDevRegistry, type ProcessOps } from '../../cli/dev/registry';
import { ConfigError } from '../../schemas/env';
import { fleetLayoutSchema } from '../../schemas/layout';
import { descendants, stillRunning } from './support';
import { eventually } from '../support/eventually';

const ROOT = path.resolve(__dirname, '../..');
const devLayout = () =>
  fleetLayoutSchema.parse(JSON.parse(readFileSync(path.join(ROOT, 'examples/dev.layout.json'), 'utf8')));

describe('haru dev configuration', () => {
  it('defaults every port and path, counting blank variables as unset', () => {
    const config = loadDevConfig({ PORT: '', HARU_STATE_DIR: ' ', TEMPORAL_ADDRESS: '' }, '/srv/app', ROOT);
    expect(config.env).toMatchObject({
      PORT: 8700,
      HARU_TEMPORAL_PORT: 7233,
      HARU_TEMPORAL_UI_PORT: 8233,
      HARU_WORKER_METRICS_PORT: 9464,
      HARU_WORKER_SDK_METRICS_PORT: 9465,
      HARU_SIM_PORT_OFFSET: 0,
      HARU_TASK_QUEUE: 'haru',
    });
    expect(config.temporal.namespace).toBe('default');
    expect(config.stateDir).toBe('/srv/app/.haru');
    expect(config.layoutFile).toBe(path.join(ROOT, 'examples/dev.layout.json'));
    expect(config.startsTemporal).toBe(true);
    expect(config.temporal.address).toBe('127.0.0.1:7233');
  });

  it('uses a given Temporal server instead of starting one', () => {
    const config = loadDevConfig({ TEMPORAL_ADDRESS: 'temporal.internal:7233' }, '/srv/app', ROOT);
    expect(config.startsTemporal).toBe(false);
    expect(config.temporal.address).toBe('temporal.internal:7233');
  });

  it('names every bad variable at once', () => {
    const run = () =>
      loadDevConfig({ PORT: '70000', HARU_SIM_PORT_OFFSET: 'ten', DATABASE_URL: 'mysql://x' }, '/', ROOT);
    expect(run).toThrow(ConfigError);
    const message = (() => {
      try {
        run();
      } catch (err) {
        return (err as Error).message;
      }
      return '';
    })();
    for (const name of ['PORT', 'HARU_SIM_PORT_OFFSET', 'DATABASE_URL'])
      expect(message).toMatch(new RegExp(`^  ${name}: `, 'm'));
  });
});

describe("a dev domain's supervisor token", () => {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'haru-dev-token-'));
  const layoutWith = (supervisor: Record<string, string>) => {
    const layout = devLayout();
    layout.domains[1] = { ...layout.domains[1]!, supervisor };
    const file = path.join(dir, `layout-${Object.values(supervisor).join('-').replace(/\W/g, '')}.json`);
    writeFileSync(file, JSON.stringify(layout));
    return { layout, file, slug: layout.domains[1].slug };
  };

  it("is the one the domain's layout names, for the simulated supervisor as for the worker", () => {
    const tokenFile = path.join(dir, 'west.token');
    writeFileSync(tokenFile, 'west-from-file\n', { mode: 0o600 });
    const byEnv = layoutWith({ tokenEnv: 'HARU_SECRET_WEST_TOKEN' });
    const env = { HARU_SECRET_WEST_TOKEN: 'w', HARU_SUPERVISOR_TOKEN: 'f' };
    expect(simSupervisorToken(byEnv.layout, byEnv.slug, env)).toBe('w');
    expect(simSupervisorToken(byEnv.layout, 'east', env)).toBe('f');
    const byFile = layoutWith({ tokenFile });
    expect(simSupervisorToken(byFile.layout, byFile.slug, { HARU_SECRETS_DIR: dir })).toBe('west-from-file');
  });

  it('stops haru dev before anything starts when a domain names a token variable that is unset', () => {
    const { file, slug } = layoutWith({ tokenEnv: 'HARU_SECRET_UNSET' });
    const configure = () => configureDevStack({ HARU_DEV_LAYOUT: file }, dir, ROOT);
    expect(configure).toThrow(ConfigError);
    expect(configure).toThrow(`domain ${slug}: supervisor.tokenEnv: HARU_SECRET_UNSET is not set`);
    expect(() => configureDevStack({ HARU_DEV_LAYOUT: file, HARU_SECRET_UNSET: 't' }, dir, ROOT)).not.toThrow();
  });
});

describe('the dev layout', () => {
  it('shifts every supervisor and model port by the offset and keeps the rest', () => {
    const source = devLayout();
    const shifted = buildDevLayout(source, { portOffset: 1000, stateDir: '/state' });
    expect(shifted.fleet).toEqual(source.fleet);
    const before = simulatorPorts(source).map((p) => p.port);
    const after = simulatorPorts(shifted).map((p) => p.port);
    expect(after).toEqual(before.map((p) => p + 1000));
    expect(shifted.domains[0]!.supervisorUrl).toBe('http://127.0.0.1:9711');
  });

  it('puts relative checkpoint directories under the state directory', () => {
    const shifted = buildDevLayout(devLayout(), { portOffset: 0, stateDir: '/state' });
    const dirs = shifted.domains.flatMap((d) =>
      d.slots.flatMap((s) => (s.kind === 'training' ? [s.checkpointDir] : [])),
    );
    expect(dirs).toEqual([
      '/state/checkpoints/east/gpu0',
      '/state/checkpoints/east/gpu1',
      '/state/checkpoints/west/gpu0',
      '/state/checkpoints/west/gpu1',
    ]);
  });

  it('refuses a domain it cannot simulate on this machine, and a port pushed out of range', () => {
    const layout = devLayout();
    const remote = { ...layout, domains: [{ ...layout.domains[0]!, supervisorUrl: 'https://gpu.example.com:8701' }] };
    expect(() => buildDevLayout(remote, { portOffset: 0, stateDir: '/s' })).toThrow(
      /domain east: supervisorUrl .* must be http:\/\/127\.0\.0\.1/,
    );
    expect(() => buildDevLayout(layout, { portOffset: 60_000, stateDir: '/s' })).toThrow(/HARU_SIM_PORT_OFFSET/);
  });
});

describe('the port plan', () => {
  const config = loadDevConfig({}, '/srv/app', ROOT);
  const layout = buildDevLayout(devLayout(), { portOffset: 0, stateDir: '/s' });

  it('lists the API, Temporal, its UI, both metrics endpoints and every simulated port, each with its variable', () => {
    const plan = planPorts(config, layout);
    expect(plan.slice(0, 5)).toEqual([
      { port: 8700, what: 'the Haru API', variable: 'PORT' },
      { port: 7233, what: 'the Temporal dev server (gRPC)', variable: 'HARU_TEMPORAL_PORT' },
      { port: 8233, what: 'the Temporal Web UI', variable: 'HARU_TEMPORAL_UI_PORT' },
      { port: 9464, what: 'the worker metrics endpoint', variable: 'HARU_WORKER_METRICS_PORT' },
      { port: 9465, what: 'the Temporal SDK metrics endpoint', variable: 'HARU_WORKER_SDK_METRICS_PORT' },
    ]);
    expect(plan.slice(5).every((p) => p.variable === 'HARU_SIM_PORT_OFFSET')).toBe(true);
    expect(plan).toHaveLength(5 + 8);
    expect(duplicatePorts(plan)).toEqual([]);
  });

  it('leaves out Temporal with TEMPORAL_ADDRESS and each metrics port when it is 0', () => {
    const own = loadDevConfig(
      { TEMPORAL_ADDRESS: 'x:1', HARU_WORKER_METRICS_PORT: '0', HARU_WORKER_SDK_METRICS_PORT: '0' },
      '/w',
      ROOT,
    );
    const variables = planPorts(own, layout).map((p) => p.variable);
    expect(variables).not.toContain('HARU_TEMPORAL_PORT');
    expect(variables).not.toContain('HARU_WORKER_METRICS_PORT');
    expect(variables).not.toContain('HARU_WORKER_SDK_METRICS_PORT');
  });

  it('gives the dev worker the SDK metrics endpoint as haru worker has it: the same telemetry, on 127.0.0.1', () => {
    const setup = configureDevStack({ HARU_WORKER_SDK_METRICS_PORT: '19465' }, '/w', ROOT);
    expect(setup.worker.HARU_WORKER_SDK_METRICS_PORT).toBe(19465);
    expect(sdkTelemetry(setup.worker)).toEqual({ metrics: { prometheus: { bindAddress: '127.0.0.1:19465' } } });
    const off = configureDevStack({ HARU_WORKER_SDK_METRICS_PORT: '0' }, '/w', ROOT);
    expect(sdkTelemetry(off.worker)).toBeUndefined();
  });

  it('reports two parts wanting one port', () => {
    const clash = loadDevConfig({ PORT: '8711' }, '/w', ROOT);
    expect(duplicatePorts(planPorts(clash, layout))).toEqual([
      'port 8711 is wanted by both the Haru API and the supervisor of simulated domain east (PORT, HARU_SIM_PORT_OFFSET)',
    ]);
  });

  it('names each busy port with what it is for and the variable that moves it', async () => {
    const plan = planPorts(config, layout);
    const busy = new Set([8700, 8233]);
    const error = await assertPortsFree(plan, async (p) => !busy.has(p)).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(PortInUseError);
    expect((error as Error).message.split('\n')).toEqual([
      'port 8700 is already in use (wanted for the Haru API): stop what is using it, or set PORT to choose another',
      'port 8233 is already in use (wanted for the Temporal Web UI): stop what is using it, or set HARU_TEMPORAL_UI_PORT to choose another',
    ]);
    await expect(assertPortsFree(plan, async () => true)).resolves.toBeUndefined();
  });
});

describe('the process registry', () => {
  let dir: string;
  beforeEach(() => {
    dir = mkdtempSync(path.join(os.tmpdir(), 'haru-dev-registry-'));
  });
  afterEach(() => rmSync(dir, { recursive: true, force: true }));

  const ops = (alive: Record<number, string>, killed: number[]): ProcessOps => ({
    isAlive: (pid) => pid in alive,
    commandLine: (pid) => alive[pid] ?? null,
    killGroup: (pgid) => killed.push(pgid),
  });

  it('kills the process groups a dead dev stack left, but only those still running what it started', () => {
    const first = createDevRegistry(dir, ops({}, []));
    first.claim();
    first.add('temporal dev server', 101, 'start-dev');
    first.add('simulated domain east', 102, 'sim');
    first.add('simulated domain west', 103, 'sim');
    const killed: number[] = [];
    // 101 still runs the server; 102 is gone; 103 was recycled by an unrelated process.
    const second = createDevRegistry(
      dir,
      ops({ 101: 'temporal server start-dev --port 7233', 103: 'vim notes' }, killed),
    );
    expect(second.claim()).toEqual(['temporal dev server (pid 101)']);
    expect(killed).toEqual([101]);
  });

  it('refuses to share the state directory with a live dev stack', () => {
    mkdirSync(path.join(dir, 'dev'), { recursive: true });
    writeFileSync(path.join(dir, 'dev', 'processes.json'), JSON.stringify({ devPid: 4242, children: [] }));
    const registry = createDevRegistry(dir, ops({ 4242: 'node bin/haru.js dev' }, []));
    expect(() => registry.claim()).toThrow(/another haru dev \(pid 4242\) is running .* set HARU_STATE_DIR/);
  });

  it('removes its file on release', () => {
    const registry = createDevRegistry(dir, ops({}, []));
    registry.claim();
    registry.release();
    expect(() => readFileSync(registry.file)).toThrow();
  });
});

describe('the banner', () => {
  const info: BannerInfo = {
    apiUrl: 'http://127.0.0.1:8700',
    temporalUiUrl: 'http://127.0.0.1:8233',
    temporalAddress: '127.0.0.1:7233',
    metricsUrl: 'http://127.0.0.1:9464/metrics',
    sdkMetricsUrl: 'http://127.0.0.1:9465/metrics',
    namespace: 'default',
    fleetSlug: 'dev',
    fleetId: '11111111-1111-4111-8111-111111111111',
    activeDomain: 'east',
    standbyDomains: ['west'],
    routeRevision: 3,
    model: 'qwen-0.5b',
    haru: 'node bin/haru.js',
    killCommand: 'node bin/haru.js sim kill --state-dir .haru/sim/east',
    reviveCommand:
      'node bin/haru.js sim domain --layout .haru/dev/layout.json --domain east --state-dir .haru/sim/east --standby',
    temporal: 'temporal',
    stateDir: '.haru',
    logFile: '.haru/logs/haru.log',
    databaseLabel: 'embedded Postgres',
    hasApiToken: false,
    cliEnv: '',
  };

  it('shows the URLs and the copy-paste commands: chat, watch, kill, revive, temporal', () => {
    const text = renderBanner(info);
    expect(text).toContain('API (OpenAI-compatible)  http://127.0.0.1:8700/v1');
    expect(text).toContain('Temporal Web UI          http://127.0.0.1:8233');
    expect(text).toContain(
      'Metrics                  worker http://127.0.0.1:9464/metrics, Temporal SDK http://127.0.0.1:9465/metrics',
    );
    expect(renderBanner({ ...info, sdkMetricsUrl: null })).toContain(
      'Temporal SDK off (HARU_WORKER_SDK_METRICS_PORT=0)',
    );
    expect(text).toContain(
      `curl -s http://127.0.0.1:8700/v1/chat/completions -H 'content-type: application/json' \\\n    -d '{"model":"qwen-0.5b","messages":[{"role":"user","content":"Hello from Haru!"}]}'`,
    );
    expect(text).toContain('  node bin/haru.js fleet watch dev --next');
    expect(text).toContain('  node bin/haru.js sim kill --state-dir .haru/sim/east');
    expect(text).toContain(`  ${info.reviveCommand}`);
    expect(text).toContain(
      `temporal --address 127.0.0.1:7233 --namespace default workflow list --query "HaruFleetSlug='${info.fleetSlug}'"`,
    );
    expect(text).toContain(`workflow signal --workflow-id haru/${info.fleetId}/monitor --name pauseAutoFailover`);
  });

  it('sends the token by reference and points the CLI at a moved API', () => {
    const text = renderBanner({
      ...info,
      hasApiToken: true,
      apiUrl: 'http://127.0.0.1:9000',
      cliEnv: 'HARU_URL=http://127.0.0.1:9000 ',
    });
    expect(text).toContain(`-H "authorization: Bearer $HARU_API_TOKEN"`);
    expect(text).toContain('HARU_URL=http://127.0.0.1:9000 node bin/haru.js fleet watch dev --next');
    expect(text).not.toMatch(/Bearer [A-Za-z0-9]{8,}/);
  });
});

describe('simulated domain processes', () => {
  it('never pass the control plane’s secrets or the API’s port to a simulated domain', () => {
    const env = simDomainEnv(
      {
        PATH: '/bin',
        HARU_API_TOKEN: 'secret',
        DATABASE_URL: 'postgres://u:p@h/db',
        PORT: '8700',
        HARU_SUPERVISOR_TOKEN: 's',
      },
      '/state',
    );
    expect(env).toEqual({ PATH: '/bin', HARU_SUPERVISOR_TOKEN: 's', HARU_STATE_DIR: '/state' });
  });

  it('start a standby with --standby, each in its own state directory', () => {
    expect(simDomainArgs('/s/dev/layout.json', 'west', '/s', true)).toEqual([
      'sim',
      'domain',
      '--layout',
      '/s/dev/layout.json',
      '--domain',
      'west',
      '--state-dir',
      '/s/sim/west',
      '--standby',
    ]);
    expect(simDomainArgs('/s/dev/layout.json', 'east', '/s', false)).not.toContain('--standby');
  });

  it('stop as a whole process group, grandchildren included, with SIGKILL after the grace', async () => {
    // A leader that ignores SIGTERM, with a grandchild that ignores it too: only the group SIGKILL ends them.
    const child = spawn('sh', ['-c', 'trap "" TERM; sh -c "trap \\"\\" TERM; sleep 300" & wait'], {
      detached: true,
      stdio: 'ignore',
    });
    const managed = manageChild('stubborn', child);
    await eventually('the grandchild', () => (descendants(managed.pid).length > 0 ? true : undefined), 10_000, 20);
    const tree = [managed.pid, ...descendants(managed.pid)];
    await managed.stop(300);
    expect(await managed.exited).toEqual({ code: null, signal: 'SIGKILL' });
    expect(stillRunning(tree)).toEqual([]);
    expect(signalGroup(managed.pid, 0)).toBe(false);
  });
});
