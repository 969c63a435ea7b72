/**
 * The GPU-host image (deploy/gpu-host/): no Docker engine runs here, so the Dockerfile is linted with the
 * real hadolint and checked against the tree, and its entrypoint (deploy/gpu-host/main.ts) runs for real
 * with a stand-in `vllm` (the simulator's fake vLLM behind vLLM's command line): the supervisor, then each
 * GPU's servers one after another, GPUs in parallel, and everything stopped on a signal or a crash.
 */
import { type ChildProcess, spawn, spawnSync } from 'node:child_process';
import { chmodSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import YAML from 'yaml';
import { planHost } from '../../deploy/gpu-host/plan';
import { ConfigError } from '../../schemas/env';
import { supervisorConfigSchema, supervisorStatusSchema } from '../../schemas/supervisor';
import { supervisorEnvSchema } from '../../supervisor/config';
import { eventually } from '../support/eventually';
import { freePort } from '../support/ports';
import { describeWithTools, findComposeV2, HADOLINT } from '../support/tools';

const ROOT = path.resolve(__dirname, '../..');
const TOKEN = 'gpu-host-test-token';
// Real processes (a simulated domain, nginx, the launcher and its servers) start and stop: generous on a
// loaded machine.
jest.setTimeout(120_000);
const DOCKERFILE = readFileSync(path.join(ROOT, 'deploy/gpu-host/Dockerfile'), 'utf8');
const instructions = DOCKERFILE.split('\n')
  .filter((l) => /^[A-Z]+\s/.test(l))
  .map((l) => l.trim());

describe('deploy/gpu-host/Dockerfile', () => {
  it('builds on a pinned vLLM image and Node 20, and installs Haru’s production dependencies only', () => {
    const froms = instructions.filter((l) => l.startsWith('FROM '));
    expect(froms).toEqual([
      expect.stringMatching(/^FROM node:20-[\w.-]+ AS haru$/),
      expect.stringMatching(/^FROM vllm\/vllm-openai:v\d+\.\d+\.\d+$/),
    ]);
    expect(DOCKERFILE).toMatch(/npm ci --omit=dev/);
    expect(DOCKERFILE).toMatch(/HARU_SKIP_TEMPORAL_INSTALL=1/);
    expect(instructions).toContain('COPY --from=haru /usr/local/bin/node /usr/local/bin/node');
    expect(instructions).toContain('COPY --from=haru /opt/haru /opt/haru');
    expect(instructions.filter((l) => l.startsWith('USER '))).toEqual(['USER 10001']);
  });

  it('copies only files that exist, the postinstall script before `npm ci`', () => {
    const sources = instructions
      .filter((l) => l.startsWith('COPY ') && !l.includes('--from='))
      .map((l) => l.split(/\s+/).slice(1, -1))
      .flat();
    expect(sources.length).toBeGreaterThan(0);
    for (const source of sources) expect([source, existsSync(path.join(ROOT, source))]).toEqual([source, true]);
    expect(DOCKERFILE.indexOf('COPY scripts')).toBeLessThan(DOCKERFILE.indexOf('RUN npm ci'));
  });

  it('runs the launcher, which starts the shipped scripts, with the config paths the host kit documents', () => {
    const entrypoint = JSON.parse(
      instructions.find((l) => l.startsWith('ENTRYPOINT '))!.slice('ENTRYPOINT '.length),
    ) as string[];
    expect(entrypoint).toEqual(['node', '-r', 'tsx/cjs', 'deploy/gpu-host/main.ts']);
    expect(instructions).toContain('WORKDIR /opt/haru');
    const launcher = readFileSync(path.join(ROOT, entrypoint[3]!), 'utf8');
    for (const script of ['bin/haru.js', 'examples/vllm-launch.sh', 'deploy/bin/wait-http.js']) {
      expect(launcher).toContain(`'${script}'`);
      expect(existsSync(path.join(ROOT, script))).toBe(true);
    }
    expect(DOCKERFILE).toMatch(/HARU_SUPERVISOR_CONFIG=\/etc\/haru\/supervisor\.json/);
    expect(DOCKERFILE).toMatch(/HARU_VLLM_ENV_DIR=\/etc\/haru\/vllm/);
    expect(DOCKERFILE).toMatch(/HARU_SUPERVISOR_HOST=127\.0\.0\.1/);
  });
});

describeWithTools('deploy/gpu-host/Dockerfile: hadolint', [HADOLINT], () => {
  it('passes hadolint with no finding at any level', () => {
    const run = spawnSync('hadolint', ['--no-color', path.join(ROOT, 'deploy/gpu-host/Dockerfile')], {
      encoding: 'utf8',
    });
    expect({ status: run.status, out: run.stdout + run.stderr }).toEqual({ status: 0, out: '' });
  });
});

describe('deploy/gpu-host/plan.ts', () => {
  const config = supervisorConfigSchema.parse({
    inference: [
      {
        gpuIndex: 0,
        models: [
          { name: 'a', port: 9001 },
          { name: 'b', port: 9002 },
        ],
      },
      { gpuIndex: 1, models: [{ name: 'c', port: 9003 }] },
    ],
  });
  const files: Record<string, string> = {
    a: 'HARU_VLLM_GPU=0\nHARU_VLLM_PORT=9001\nHARU_VLLM_MODEL=org/a\nHARU_VLLM_ARGS=--x 1  --y\nHF_HOME=/hf\n# HF_TOKEN=\n',
    b: 'HARU_VLLM_GPU=0\nHARU_VLLM_PORT=9002\nHARU_VLLM_MODEL=org/b\n',
    c: 'HARU_VLLM_GPU=1\nHARU_VLLM_PORT=9003\nHARU_VLLM_MODEL=org/c\n',
  };
  const reader =
    (over: Record<string, string> = {}) =>
    (name: string) => {
      const all = { ...files, ...over };
      if (!(name in all)) throw new Error(`ENOENT ${name}.env`);
      return all[name]!;
    };

  it('orders each GPU’s servers as the supervisor config lists them, with the env file’s model, arguments and extras', () => {
    const plan = planHost(config, reader());
    expect(plan.gpus.map((g) => [g.gpuIndex, g.servers.map((s) => s.name)])).toEqual([
      [0, ['a', 'b']],
      [1, ['c']],
    ]);
    expect(plan.gpus[0]!.servers[0]).toEqual({
      name: 'a',
      gpuIndex: 0,
      port: 9001,
      model: 'org/a',
      args: ['--x', '1', '--y'],
      env: { HF_HOME: '/hf' },
    });
  });

  it('refuses env files that disagree with the supervisor config, are missing or invalid, listing every problem', () => {
    const bad = () =>
      planHost(
        config,
        reader({ b: 'HARU_VLLM_GPU=1\nHARU_VLLM_PORT=9009\nHARU_VLLM_MODEL=org/b\n', c: 'HARU_VLLM_GPU=1\n' }),
      );
    expect(bad).toThrow(ConfigError);
    expect(bad).toThrow(/b: HARU_VLLM_GPU=1 but the supervisor config has it on GPU 0/);
    expect(bad).toThrow(/b: HARU_VLLM_PORT=9009 but the supervisor config has port 9002/);
    expect(bad).toThrow(/c: invalid environment file:\n\s+HARU_VLLM_PORT/);
    const { a: _a, ...withoutA } = files;
    expect(() => planHost(config, (n) => reader({})(n === 'a' ? 'missing' : n))).toThrow(
      /a: cannot read its environment file/,
    );
    expect(withoutA).not.toHaveProperty('a');
    const slashed = supervisorConfigSchema.parse({
      inference: [{ gpuIndex: 0, models: [{ name: 'org/x', port: 1 }] }],
    });
    expect(() => planHost(slashed, reader())).toThrow(/org\/x: names a file and a systemd instance/);
  });
});

describe('deploy/gpu-host/main.ts with a stand-in vllm', () => {
  const LOAD_DELAY_MS = 2500;
  let dir: string;
  let supervisorPort: number;
  let ports: Record<'a' | 'b' | 'c', number>;
  let eventsFile: string;
  const launched: { child: ChildProcess; exited: Promise<unknown> }[] = [];

  beforeAll(async () => {
    dir = mkdtempSync(path.join(os.tmpdir(), 'haru-gpu-host-'));
    const [s, a, b, c] = await Promise.all([freePort(), freePort(), freePort(), freePort()]);
    supervisorPort = s!;
    ports = { a: a!, b: b!, c: c! };
    eventsFile = path.join(dir, 'events.jsonl');
    writeFileSync(
      path.join(dir, 'supervisor.json'),
      JSON.stringify({
        inference: [
          {
            gpuIndex: 0,
            models: [
              { name: 'a', port: ports.a },
              { name: 'b', port: ports.b },
            ],
          },
          { gpuIndex: 1, models: [{ name: 'c', port: ports.c }] },
        ],
      }),
    );
    mkdirSync(path.join(dir, 'vllm'));
    for (const [name, gpu] of [
      ['a', 0],
      ['b', 0],
      ['c', 1],
    ] as const)
      writeFileSync(
        path.join(dir, 'vllm', `${name}.env`),
        `HARU_VLLM_GPU=${gpu}\nHARU_VLLM_PORT=${ports[name]}\nHARU_VLLM_MODEL=org/${name}\nHARU_VLLM_ARGS=--max-model-len 1024\n`,
      );
    // `vllm serve MODEL --served-model-name NAME --host H --port P …`: records what it saw when it started
    // (which of the host's servers answered already), takes a while to "load", then serves as the simulator's
    // fake vLLM. FAKE_VLLM_FAIL names a model that crashes while loading instead, FAKE_VLLM_HANG one that
    // never finishes loading.
    const bin = path.join(dir, 'bin');
    mkdirSync(bin);
    writeFileSync(
      path.join(bin, 'vllm'),
      `#!${process.execPath}
const fs = require('node:fs');
const argv = process.argv.slice(2);
const flag = (f) => argv[argv.indexOf(f) + 1];
const name = flag('--served-model-name');
const up = async (port) => fetch('http://127.0.0.1:' + port + '/health').then((r) => r.ok, () => false);
(async () => {
  const watched = JSON.parse(process.env.FAKE_VLLM_PORTS);
  const answering = [];
  for (const [model, port] of Object.entries(watched)) if (await up(port)) answering.push(model);
  fs.appendFileSync(${JSON.stringify(eventsFile)}, JSON.stringify({ name, argv, cuda: process.env.CUDA_VISIBLE_DEVICES, dev: process.env.VLLM_SERVER_DEV_MODE, haru: Object.keys(process.env).filter((k) => k.startsWith('HARU_SUPERVISOR')), answering }) + '\\n');
  await new Promise((r) => setTimeout(r, ${LOAD_DELAY_MS}));
  if (process.env.FAKE_VLLM_FAIL === name) process.exit(3);
  if (process.env.FAKE_VLLM_HANG === name) return void setInterval(() => {}, 60_000);
  require(${JSON.stringify(path.join(ROOT, 'node_modules/tsx/dist/cjs/index.cjs'))});
  await require(${JSON.stringify(path.join(ROOT, 'sim/vllm/main.ts'))}).runFakeVllm(['--model', name, '--port', flag('--port'), '--host', flag('--host')]);
})();
`,
    );
    chmodSync(path.join(bin, 'vllm'), 0o755);
  });

  // A test that failed half-way leaves nothing running for the next: the launcher leads its own process
  // group, with everything it started in it.
  afterEach(async () => {
    for (const { child, exited } of launched.splice(0)) {
      if (child.exitCode !== null || child.signalCode !== null) continue;
      try {
        process.kill(-child.pid!, 'SIGKILL');
      } catch {
        // already gone
      }
      await exited;
    }
  });
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  const launch = (extra: Record<string, string> = {}) => {
    rmSync(eventsFile, { force: true });
    const child = spawn(process.execPath, ['-r', 'tsx/cjs', path.join(ROOT, 'deploy/gpu-host/main.ts')], {
      cwd: ROOT,
      env: {
        PATH: `${path.join(dir, 'bin')}:${process.env.PATH}`,
        HOME: dir,
        HARU_SUPERVISOR_CONFIG: path.join(dir, 'supervisor.json'),
        PORT: String(supervisorPort),
        HARU_SUPERVISOR_TOKEN: TOKEN,
        HARU_SUPERVISOR_HOST: '127.0.0.1',
        HARU_VLLM_ENV_DIR: path.join(dir, 'vllm'),
        HARU_HOST_STOP_TIMEOUT_S: '10',
        FAKE_VLLM_PORTS: JSON.stringify(ports),
        ...extra,
      },
      stdio: ['ignore', 'pipe', 'pipe'],
      detached: true,
    });
    let output = '';
    child.stdout!.on('data', (d: Buffer) => (output += d.toString()));
    child.stderr!.on('data', (d: Buffer) => (output += d.toString()));
    const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
    launched.push({ child, exited });
    return { child, exited, output: () => output };
  };
  const events = () =>
    existsSync(eventsFile)
      ? readFileSync(eventsFile, 'utf8')
          .trim()
          .split('\n')
          .map(
            (l) =>
              JSON.parse(l) as {
                name: string;
                argv: string[];
                cuda: string;
                dev: string;
                haru: string[];
                answering: string[];
              },
          )
      : [];
  const answers = (port: number, p = '/health') =>
    fetch(`http://127.0.0.1:${port}${p}`).then(
      (r) => r.ok,
      () => false,
    );

  it('starts the supervisor and each GPU’s servers one after another (each ready first), GPUs in parallel; SIGTERM stops all', async () => {
    const host = launch();
    await eventually(
      'all three servers',
      async () => (await Promise.all(Object.values(ports).map((p) => answers(p)))).every(Boolean),
      30_000,
    );
    const seen = Object.fromEntries(events().map((e) => [e.name, e]));
    expect(Object.keys(seen).sort()).toEqual(['a', 'b', 'c']);
    // b (GPU 0) started only once a answered; c (GPU 1) did not wait for GPU 0.
    expect(seen.a!.answering).toEqual([]);
    expect(seen.b!.answering).toContain('a');
    expect(seen.c!.answering).toEqual([]);
    // vLLM was started the way examples/vllm-launch.sh starts it, on its own GPU.
    expect(seen.a!.argv.slice(0, 2)).toEqual(['serve', 'org/a']);
    expect(seen.a!.argv).toEqual(
      expect.arrayContaining(['--enable-sleep-mode', '--host', '127.0.0.1', '--max-model-len', '1024']),
    );
    expect([seen.a!.cuda, seen.b!.cuda, seen.c!.cuda, seen.a!.dev]).toEqual(['0', '0', '1', '1']);
    // The supervisor's token stays with the supervisor.
    expect(seen.a!.haru).toContain('HARU_SUPERVISOR_HOST');
    expect(seen.a!.haru).not.toContain('HARU_SUPERVISOR_TOKEN');
    // The supervisor drives the servers it was configured with.
    const status = supervisorStatusSchema.parse(
      await (
        await fetch(`http://127.0.0.1:${supervisorPort}/v1/status`, { headers: { authorization: `Bearer ${TOKEN}` } })
      ).json(),
    );
    expect(status.models.map((m) => [m.name, m.state]).sort()).toEqual([
      ['a', 'awake'],
      ['b', 'awake'],
      ['c', 'awake'],
    ]);

    host.child.kill('SIGTERM');
    expect(await host.exited).toBe(0);
    for (const port of [supervisorPort, ...Object.values(ports)]) expect(await answers(port, '/')).toBe(false);
  });

  it('serves the supervisor while a server is still loading, and holds the GPU’s next server back', async () => {
    const host = launch({ FAKE_VLLM_HANG: 'a' });
    await eventually('the supervisor', () => answers(supervisorPort, '/healthz'), 20_000);
    await eventually('c, on the other GPU', () => answers(ports.c), 20_000);
    expect(await answers(ports.a)).toBe(false);
    expect(events().map((e) => e.name)).not.toContain('b');
    host.child.kill('SIGTERM');
    expect(await host.exited).toBe(0);
    for (const port of [supervisorPort, ...Object.values(ports)]) expect(await answers(port, '/')).toBe(false);
  });

  it('stops the whole host and exits 1 when a server dies while loading, so the container restarts it', async () => {
    const host = launch({ FAKE_VLLM_FAIL: 'a' });
    expect(await host.exited).toBe(1);
    expect(host.output()).toMatch(/process exited: stopping the host.*vllm a/);
    // b never started (a never became ready), and the supervisor and c are gone.
    expect(events().map((e) => e.name)).not.toContain('b');
    for (const port of [supervisorPort, ...Object.values(ports)]) expect(await answers(port, '/')).toBe(false);
  });
});

describe('deploy/gpu-host/compose.yml', () => {
  const file = path.join(ROOT, 'deploy/gpu-host/compose.yml');
  interface Service {
    build?: { context: string; dockerfile: string };
    image?: string;
    network_mode?: string;
    env_file?: string;
    volumes?: string[];
    environment?: Record<string, string>;
    deploy?: { resources: { reservations: { devices: { driver: string; capabilities: string[] }[] } } };
  }
  const yaml = YAML.parse(readFileSync(file, 'utf8')) as { services: Record<string, Service> };

  it('runs the GPU-host image with the GPUs and the gateway with the shipped config, both on the host’s network', () => {
    const host = yaml.services['gpu-host']!;
    const gateway = yaml.services.gateway!;
    expect(path.resolve(path.dirname(file), host.build!.context, host.build!.dockerfile)).toBe(
      path.join(ROOT, 'deploy/gpu-host/Dockerfile'),
    );
    expect(host.deploy!.resources.reservations.devices).toEqual([
      expect.objectContaining({ driver: 'nvidia', capabilities: ['gpu'] }),
    ]);
    expect([host.network_mode, gateway.network_mode]).toEqual(['host', 'host']);
    expect(gateway.image).toMatch(/^nginx:\d+\.\d+/);
    const mounted = (gateway.volumes ?? []).map((v) => v.split(':'));
    const conf = mounted.find(([, target]) => target === '/etc/nginx/conf.d/default.conf')!;
    expect(path.resolve(path.dirname(file), conf[0]!)).toBe(path.join(ROOT, 'deploy/nginx/haru-gpu-host.conf'));
    expect(host.volumes).toContain('${HARU_ETC:-/etc/haru}:/etc/haru:ro');
    expect(host.env_file).toBe('${HARU_ETC:-/etc/haru}/supervisor.env');
  });

  it('maps nvidia-smi’s host pids through the host’s /proc, and takes the token as a file', () => {
    const host = yaml.services['gpu-host']!;
    const secrets = yaml as unknown as { secrets: Record<string, { file: string }> };
    // The container has its own PID namespace: HARU_HOST_PROC names where the host's /proc is.
    expect(host.volumes).toContain('/proc:/host/proc:ro');
    expect(host.environment).toMatchObject({
      HARU_HOST_PROC: '/host/proc',
      HARU_SUPERVISOR_TOKEN_FILE: '/run/secrets/supervisor_token',
    });
    expect(secrets.secrets.supervisor_token!.file).toBe('${HARU_ETC:-/etc/haru}/supervisor.token');
    const env = { HARU_SUPERVISOR_CONFIG: '/etc/haru/supervisor.json', ...host.environment };
    expect(supervisorEnvSchema.safeParse(env).error?.issues ?? []).toEqual([]);
    // A container's cgroup is read-only: process-group tracking is said explicitly, not fallen back to.
    expect(host.environment!.HARU_TRAINING_ALLOW_PGROUP).toBe('1');
  });

  const compose2 = findComposeV2();
  (compose2.argv ? it : it.skip)(
    `is accepted by \`docker compose config\`, with the example supervisor.env as the environment${compose2.argv ? '' : ` [skipped: ${compose2.reason}]`}`,
    () => {
      const etc = mkdtempSync(path.join(os.tmpdir(), 'haru-etc-'));
      try {
        writeFileSync(
          path.join(etc, 'supervisor.env'),
          readFileSync(path.join(ROOT, 'deploy/systemd/env/supervisor.env')),
        );
        const [command, ...prefix] = compose2.argv!;
        const run = spawnSync(command!, [...prefix, '-f', file, 'config', '--format', 'json'], {
          encoding: 'utf8',
          env: { PATH: process.env.PATH, HOME: process.env.HOME, HARU_ETC: etc },
        });
        expect({ status: run.status, stderr: run.stderr }).toEqual({ status: 0, stderr: '' });
        const resolved = JSON.parse(run.stdout) as { services: Record<string, Service> };
        const env = resolved.services['gpu-host']!.environment!;
        expect(supervisorEnvSchema.safeParse(env).error?.issues ?? []).toEqual([]);
        expect(env.HARU_SUPERVISOR_HOST).toBe('127.0.0.1');
      } finally {
        rmSync(etc, { recursive: true, force: true });
      }
    },
  );
});
