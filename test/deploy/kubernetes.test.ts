/**
 * deploy/kubernetes/: no cluster runs here, so the manifests are checked for what can be checked without one.
 * Every manifest is validated by kubernetes-validate (PyPI, Kubernetes' own OpenAPI schemas, strict: an unknown
 * field fails) against the oldest and the newest release it covers; then against the code: each container's
 * command is a `haru` command, each variable one its process reads, and the environment a pod would get
 * (ConfigMaps, the example Secret as values and as mounted files) is parsed by the process's own config
 * loader; probes hit the routes the API and the worker serve, on the ports the config gives them; the pods
 * meet the `restricted` Pod Security Standard the namespace enforces, as the image's numeric user.
 */
import { spawnSync } from 'node:child_process';
import { chmodSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { Command } from 'commander';
import YAML from 'yaml';
import type { z } from 'zod';
import { apiConfigSchema, loadApiConfig } from '../../api/config';
import { ROUTE_DOCS } from '../../api/openapi';
import { buildProgram } from '../../cli/main';
import { dbEnvSchema } from '../../db/config';
import { loadWorkerConfig, workerConfigSchema } from '../../workers/config';
import { WORKER_ROUTES } from '../../workers/http-server';
import { ensurePythonTool, KUBERNETES_VALIDATE } from '../support/python-tools';

const ROOT = path.resolve(__dirname, '../..');
const DIR = path.join(ROOT, 'deploy/kubernetes');
const read = (file: string) => readFileSync(path.join(DIR, file), 'utf8');

/** Manifests read as Kubernetes reads YAML (1.1: a mode `0440` is octal). */
const yaml11 = { version: '1.1' as const };
/* eslint-disable @typescript-eslint/no-explicit-any -- Kubernetes objects, read as the YAML says them */
type Obj = Record<string, any>;
const docsOf = (file: string): Obj[] =>
  YAML.parseAllDocuments(read(file), yaml11)
    .map((d) => d.toJS() as Obj | null)
    .filter((d): d is Obj => d !== null);

const kustomization = YAML.parse(read('kustomization.yaml')) as {
  namespace: string;
  resources: string[];
  images: { name: string; newTag: string; newName?: string }[];
};
const manifests = readdirSync(DIR).filter((f) => f.endsWith('.yaml') && f !== 'kustomization.yaml');
const objects = kustomization.resources.flatMap(docsOf);
const find = (kind: string, name: string): Obj => {
  const o = objects.find((x) => x.kind === kind && x.metadata?.name === name);
  if (!o) throw new Error(`no ${kind} ${name} in the kustomization`);
  return o;
};
const secret = docsOf('secret.example.yaml')[0]!;
const seedJob = docsOf('seed-job.yaml')[0]!;
const pkg = JSON.parse(readFileSync(path.join(ROOT, 'package.json'), 'utf8')) as { version: string };

interface Process {
  deployment: string;
  command: string;
  schema: z.ZodObject;
}
const PROCESSES: Process[] = [
  { deployment: 'haru-api', command: 'api', schema: apiConfigSchema },
  { deployment: 'haru-worker', command: 'worker', schema: workerConfigSchema },
];
const podOf = (deployment: string): Obj => find('Deployment', deployment).spec.template.spec;
const containerOf = (deployment: string): Obj => {
  const containers = podOf(deployment).containers as Obj[];
  expect(containers).toHaveLength(1);
  return containers[0]!;
};

/**
 * What kubelet does for the pod, in `root`: each volume a folder (`root/volumes/NAME`), a Secret volume's items
 * written there as the example Secret's values (mode: the volume's defaultMode, group-readable as fsGroup makes
 * it), then each init container's command run by `sh` with its mount paths pointing at those folders. Returns
 * the main container's environment: its ConfigMaps (envFrom), then `env` (values, and Secret keys), every
 * `*_FILE` path moved to the folder of the volume mounted there.
 */
function podEnvironment(deployment: string, root: string): Record<string, string> {
  const pod = podOf(deployment);
  const volumeDir = (name: string) => path.join(root, 'volumes', name);
  for (const volume of pod.volumes as Obj[]) {
    mkdirSync(volumeDir(volume.name), { recursive: true });
    if (!volume.secret) continue;
    expect(volume.secret.secretName).toBe(secret.metadata.name);
    for (const item of volume.secret.items as Obj[]) {
      const file = path.join(volumeDir(volume.name), item.path);
      writeFileSync(file, `${secret.stringData[item.key]}\n`); // a Secret's value as a file, newline and all
      chmodSync(file, (item.mode ?? volume.secret.defaultMode ?? 0o644) | 0o040);
    }
  }
  /** Where a path of container `c` is here: in the folder of the volume mounted at it (the deepest mount). */
  const onDisk = (c: Obj, file: string) => {
    const mount = ((c.volumeMounts ?? []) as Obj[])
      .filter((m) => file === m.mountPath || file.startsWith(`${m.mountPath}/`))
      .sort((a, b) => b.mountPath.length - a.mountPath.length)[0];
    if (!mount) throw new Error(`${c.name}: ${file} is on no volume`);
    return path.join(volumeDir(mount.name), file.slice(mount.mountPath.length));
  };
  /** A shell command with each absolute path in it moved by onDisk. */
  const commandOnDisk = (c: Obj, command: string) =>
    command
      .split(' ')
      .map((word) => (word.startsWith('/') ? onDisk(c, word) : word))
      .join(' ');
  for (const init of (pod.initContainers ?? []) as Obj[]) {
    expect(init.command.slice(0, 2)).toEqual(['sh', '-c']);
    const run = spawnSync('sh', ['-c', commandOnDisk(init, init.command[2])], { encoding: 'utf8' });
    expect([init.name, run.status, run.stderr]).toEqual([init.name, 0, '']);
  }
  const c = containerOf(deployment);
  const env: Record<string, string> = {};
  for (const from of (c.envFrom ?? []) as Obj[]) Object.assign(env, find('ConfigMap', from.configMapRef.name).data);
  for (const e of (c.env ?? []) as Obj[]) {
    if (e.value !== undefined) env[e.name] = String(e.value);
    else if (e.valueFrom?.secretKeyRef) {
      expect(e.valueFrom.secretKeyRef.name).toBe(secret.metadata.name);
      env[e.name] = secret.stringData[e.valueFrom.secretKeyRef.key];
    } else throw new Error(`${deployment}: ${e.name} comes from neither a value nor a Secret key`);
  }
  for (const [k, v] of Object.entries(env)) if (k.endsWith('_FILE')) env[k] = onDisk(c, v);
  return env;
}

describe('deploy/kubernetes: the kustomization', () => {
  it('lists every manifest but the example Secret (no real value; created by hand) and the seed Job (run per layout)', () => {
    expect([...kustomization.resources, 'secret.example.yaml', 'seed-job.yaml'].sort()).toEqual(manifests.sort());
    expect(kustomization.namespace).toBe('haru');
    expect(find('Namespace', 'haru').metadata.labels['pod-security.kubernetes.io/enforce']).toBe('restricted');
  });

  it('runs the image the Dockerfile builds, tagged with the package version', () => {
    expect(kustomization.images).toEqual([{ name: 'haru', newTag: pkg.version }]);
    for (const { deployment } of PROCESSES) expect(containerOf(deployment).image).toBe('haru');
  });

  it('runs two API replicas behind a Service, two workers, and keeps one of each through a drain', () => {
    expect(find('Deployment', 'haru-api').spec.replicas).toBe(2);
    expect(find('Deployment', 'haru-worker').spec.replicas).toBe(2);
    for (const { deployment } of PROCESSES) {
      const d = find('Deployment', deployment);
      expect(d.spec.template.metadata.labels).toMatchObject(d.spec.selector.matchLabels);
      expect(d.spec.strategy.rollingUpdate.maxUnavailable).toBe(0);
      const pdb = find('PodDisruptionBudget', deployment);
      expect(pdb.spec).toEqual({ minAvailable: 1, selector: { matchLabels: d.spec.selector.matchLabels } });
    }
    const service = find('Service', 'haru-api');
    expect(find('Deployment', 'haru-api').spec.template.metadata.labels).toMatchObject(service.spec.selector);
    expect(service.spec.ports).toEqual([{ name: 'http', port: 8700, targetPort: 'http' }]);
  });
});

describe('deploy/kubernetes: the processes', () => {
  const program = buildProgram();
  const files = mkdtempSync(path.join(os.tmpdir(), 'haru-k8s-'));
  afterAll(() => rmSync(files, { recursive: true, force: true }));

  it.each(PROCESSES)('$deployment runs `haru $command` from the image entrypoint', ({ deployment, command }) => {
    const c = containerOf(deployment);
    expect(c.command).toBeUndefined(); // the image's ENTRYPOINT, node bin/haru.js
    expect(c.args).toEqual([command]);
    expect(program.commands.map((x: Command) => x.name())).toContain(command);
  });

  it.each(PROCESSES)('$deployment sets only variables its process reads', ({ deployment, schema }) => {
    const names = Object.keys(podEnvironment(deployment, path.join(files, 'names', deployment)));
    expect(names.filter((n) => !(n in schema.shape))).toEqual([]);
  });

  it('haru-api: its loader accepts the environment, the tokens read from the mounted Secret', () => {
    const env = podEnvironment('haru-api', path.join(files, 'api'));
    // The copies are the pod user's alone, as Haru requires of a token file.
    for (const name of ['HARU_API_TOKEN_FILE', 'HARU_SUPERVISOR_TOKEN_FILE'])
      expect([name, statSync(env[name]!).mode & 0o777]).toEqual([name, 0o400]);
    const config = loadApiConfig({ ...env, HOME: files });
    expect(config).toMatchObject({
      PORT: 8700,
      HOST: '0.0.0.0',
      DATABASE_URL: secret.stringData['database-url'],
      HARU_API_TOKEN: secret.stringData['api-token'],
      HARU_SUPERVISOR_TOKEN: secret.stringData['supervisor-token'],
      HARU_TASK_QUEUE: 'haru',
    });
    expect(config.temporal.address).toBe(find('ConfigMap', 'haru-common').data.TEMPORAL_ADDRESS);
    // Secrets that have a file form are never given as values.
    expect(Object.keys(env)).not.toContain('HARU_API_TOKEN');
    expect(Object.keys(env)).not.toContain('HARU_SUPERVISOR_TOKEN');
  });

  it('haru-worker: its loader accepts the environment, on the API’s database, Temporal and task queue', () => {
    const env = podEnvironment('haru-worker', path.join(files, 'worker'));
    const config = loadWorkerConfig({ ...env, HOME: files });
    const api = loadApiConfig({ ...podEnvironment('haru-api', path.join(files, 'api2')), HOME: files });
    expect(config).toMatchObject({
      DATABASE_URL: api.DATABASE_URL,
      HARU_TASK_QUEUE: api.HARU_TASK_QUEUE,
      HARU_SUPERVISOR_TOKEN: secret.stringData['supervisor-token'],
      HARU_WORKER_METRICS_PORT: 9464,
    });
    expect(config.temporal).toEqual(api.temporal);
    expect(Object.keys(env)).not.toContain('HARU_SUPERVISOR_TOKEN');
    expect(Object.keys(env)).not.toContain('HARU_API_TOKEN_FILE'); // the worker has no use for the API's token
  });

  it('every Secret key a pod reads is one the example Secret holds', () => {
    const keys = Object.keys(secret.stringData as object);
    for (const { deployment } of PROCESSES) {
      for (const e of (containerOf(deployment).env ?? []) as Obj[])
        if (e.valueFrom?.secretKeyRef) expect(keys).toContain(e.valueFrom.secretKeyRef.key);
      for (const v of podOf(deployment).volumes as Obj[])
        for (const item of (v.secret?.items ?? []) as Obj[]) expect(keys).toContain(item.key);
    }
  });
});

describe('deploy/kubernetes/seed-job.yaml', () => {
  const pod = seedJob.spec.template.spec;
  const c = (pod.containers as Obj[])[0]!;

  it('runs `haru db seed --config FILE` once, on the layout mounted from the ConfigMap haru-layout', () => {
    expect(seedJob.metadata.namespace).toBe(kustomization.namespace);
    expect(pod.restartPolicy).toBe('Never');
    expect(c.image).toBe(`haru:${pkg.version}`);
    const [db, seed, ...rest] = c.args as string[];
    const seedCommand = buildProgram()
      .commands.find((x: Command) => x.name() === db)
      ?.commands.find((x: Command) => x.name() === seed);
    expect(seedCommand).toBeDefined();
    const flags = rest.filter((a) => a.startsWith('--'));
    expect(flags.filter((f) => !seedCommand!.options.some((o) => o.long === f))).toEqual([]);
    const file = rest[rest.indexOf('--config') + 1]!;
    const mount = (c.volumeMounts as Obj[]).find((m) => file.startsWith(`${m.mountPath}/`))!;
    const volume = (pod.volumes as Obj[]).find((v) => v.name === mount.name)!;
    expect(volume.configMap.name).toBe('haru-layout');
    expect(read('seed-job.yaml')).toContain(`--from-file=${path.basename(file)}=`);
  });

  it('reads only the state store’s variables, DATABASE_URL from the Secret the Deployments use', () => {
    const env = c.env as Obj[];
    expect(env.map((e) => e.name).filter((n) => !(n in dbEnvSchema.shape))).toEqual([]);
    const url = env.find((e) => e.name === 'DATABASE_URL')!.valueFrom.secretKeyRef;
    expect(url).toEqual(
      (containerOf('haru-api').env as Obj[]).find((e) => e.name === 'DATABASE_URL')!.valueFrom.secretKeyRef,
    );
    expect(dbEnvSchema.safeParse({ DATABASE_URL: secret.stringData[url.key] }).success).toBe(true);
  });
});

describe('deploy/kubernetes: probes', () => {
  const routes = ROUTE_DOCS.map((r) => `${r.method.toUpperCase()} ${r.path}`);
  const portNamed = (deployment: string, name: string) =>
    (containerOf(deployment).ports as Obj[]).find((p) => p.name === name)?.containerPort as number;

  it('haru-api: ready on /readyz (Postgres and Temporal answer), alive on /healthz, on the port it listens on', () => {
    const c = containerOf('haru-api');
    expect(routes).toEqual(expect.arrayContaining(['GET /readyz', 'GET /healthz']));
    expect(c.readinessProbe.httpGet).toEqual({ path: '/readyz', port: 'http' });
    expect(c.livenessProbe.httpGet).toEqual({ path: '/healthz', port: 'http' });
    expect(c.startupProbe.httpGet).toEqual({ path: '/healthz', port: 'http' });
    expect(portNamed('haru-api', 'http')).toBe(Number(find('ConfigMap', 'haru-api').data.PORT));
  });

  it('haru-worker: alive and ready on /healthz (its Temporal worker runs; an outage must not block drains), on the metrics port', () => {
    const c = containerOf('haru-worker');
    expect(WORKER_ROUTES).toEqual(expect.arrayContaining(['/readyz', '/healthz']));
    expect(c.readinessProbe.httpGet).toEqual({ path: '/healthz', port: 'metrics' });
    expect(c.livenessProbe.httpGet).toEqual({ path: '/healthz', port: 'metrics' });
    expect(c.startupProbe.httpGet).toEqual({ path: '/healthz', port: 'metrics' });
    const data = find('ConfigMap', 'haru-worker').data;
    expect(portNamed('haru-worker', 'metrics')).toBe(Number(data.HARU_WORKER_METRICS_PORT));
    expect(portNamed('haru-worker', 'sdk-metrics')).toBe(Number(data.HARU_WORKER_SDK_METRICS_PORT));
    expect(data.HARU_WORKER_METRICS_HOST).toBe('0.0.0.0'); // kubelet probes the pod's address
  });

  it('gives start-up (migrations, connecting, bundling the workflows) longer than liveness allows', () => {
    for (const { deployment } of PROCESSES) {
      const { startupProbe, livenessProbe } = containerOf(deployment);
      expect(startupProbe.periodSeconds * startupProbe.failureThreshold).toBeGreaterThanOrEqual(120);
      expect(startupProbe.periodSeconds * startupProbe.failureThreshold).toBeGreaterThan(
        livenessProbe.periodSeconds * livenessProbe.failureThreshold,
      );
    }
  });
});

describe('deploy/kubernetes: security and resources', () => {
  const dockerfileUser = /^USER (\d+):(\d+)$/m.exec(readFileSync(path.join(ROOT, 'Dockerfile'), 'utf8'));

  /** Every pod the manifests run: the Deployments' and the seed Job's. */
  const PODS: [string, Obj][] = [
    ...PROCESSES.map(({ deployment }): [string, Obj] => [deployment, podOf(deployment)]),
    ['haru-seed', seedJob.spec.template.spec],
  ];

  it.each(PODS)('%s meets the restricted Pod Security Standard as the image’s user', (_name, pod) => {
    expect(dockerfileUser).not.toBeNull();
    expect(pod.securityContext).toEqual({
      runAsNonRoot: true,
      runAsUser: Number(dockerfileUser![1]),
      runAsGroup: Number(dockerfileUser![2]),
      fsGroup: Number(dockerfileUser![2]),
      seccompProfile: { type: 'RuntimeDefault' },
    });
    expect(pod.automountServiceAccountToken).toBe(false);
    expect(pod.hostNetwork ?? pod.hostPID ?? pod.hostIPC).toBeUndefined();
    for (const c of [...((pod.initContainers ?? []) as Obj[]), ...(pod.containers as Obj[])]) {
      expect([c.name, c.securityContext]).toEqual([
        c.name,
        { allowPrivilegeEscalation: false, readOnlyRootFilesystem: true, capabilities: { drop: ['ALL'] } },
      ]);
      for (const kind of ['requests', 'limits'])
        expect([c.name, Object.keys(c.resources[kind] as object).sort()]).toEqual([c.name, ['cpu', 'memory']]);
    }
    // Restricted allows a few volume types only; every one here is a Secret, a ConfigMap or an emptyDir.
    expect((pod.volumes as Obj[]).every((v) => v.secret || v.configMap || v.emptyDir)).toBe(true);
  });

  it.each(PROCESSES)(
    '$deployment: a writable /tmp on the read-only root, the token files read-only',
    ({ deployment }) => {
      const pod = podOf(deployment);
      const c = containerOf(deployment);
      const tmp = (c.volumeMounts as Obj[]).find((m) => m.mountPath === '/tmp');
      expect((pod.volumes as Obj[]).find((v) => v.name === tmp?.name)?.emptyDir).toBeDefined();
      // The token files the init container copied are read-only to the process; the Secret itself is the
      // init container's alone.
      for (const m of c.volumeMounts as Obj[]) if (m !== tmp) expect([m.name, m.readOnly]).toEqual([m.name, true]);
      const secretVolumes = (pod.volumes as Obj[]).filter((v) => v.secret).map((v) => v.name);
      expect((c.volumeMounts as Obj[]).filter((m) => secretVolumes.includes(m.name))).toEqual([]);
    },
  );
});

let validator: { bin: string; reason?: undefined } | { bin?: undefined; reason: string };
try {
  validator = { bin: path.join(ensurePythonTool(KUBERNETES_VALIDATE), 'bin', 'kubernetes-validate') };
} catch (err) {
  validator = { reason: (err as Error).message.split('\n')[0]! };
  console.warn(`skipping kubernetes-validate: ${validator.reason}`);
}
const describeValidated = validator.bin ? describe : describe.skip;
const validatorTitle = `kubernetes-validate ${KUBERNETES_VALIDATE.version}`;

describeValidated(`${validatorTitle}${validator.reason ? ` [skipped: ${validator.reason}]` : ''}`, () => {
  const validate = (version: string, files: string[]) =>
    spawnSync(validator.bin!, ['--strict', '--kubernetes-version', version, ...files], {
      encoding: 'utf8',
      timeout: 60_000,
    });
  const bad = mkdtempSync(path.join(os.tmpdir(), 'haru-k8s-bad-'));
  afterAll(() => rmSync(bad, { recursive: true, force: true }));

  // The oldest release the package has schemas for, and the newest.
  it.each(['1.25.0', '1.37.0'])('accepts every manifest under Kubernetes %s, strict', (version) => {
    const run = validate(
      version,
      manifests.map((f) => path.join(DIR, f)),
    );
    expect({ status: run.status, stderr: run.stderr }).toEqual({ status: 0, stderr: expect.any(String) });
    const passed = [...(run.stdout + run.stderr).matchAll(/passed for resource (\S+)/g)].map((m) => m[1]);
    const expected = [...objects, secret, seedJob].map((o) => `${String(o.kind).toLowerCase()}/${o.metadata.name}`);
    expect(passed.sort()).toEqual(expected.sort());
    expect(run.stdout + run.stderr).not.toMatch(/\b(ERROR|WARN)\b/);
  });

  it('refuses a manifest with a field Kubernetes does not have, or a value of the wrong type', () => {
    const api = read('api.yaml');
    const cases = {
      'unknown-field.yaml': api.replace('readOnlyRootFilesystem: true', 'readOnlyRootFS: true'),
      'wrong-type.yaml': api.replace('replicas: 2', 'replicas: two'),
    };
    for (const [name, text] of Object.entries(cases)) {
      expect(text).not.toBe(api);
      writeFileSync(path.join(bad, name), text);
      const run = validate('1.37.0', [path.join(bad, name)]);
      expect([name, run.status]).toEqual([name, 1]);
      expect(run.stdout + run.stderr).toMatch(/ERROR/);
    }
  });
});
