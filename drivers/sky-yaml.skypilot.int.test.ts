/**
 * The rendered YAML as SkyPilot itself reads it: test/fixtures/sky/read-task-yaml.py loads each file with
 * SkyPilot's own parser and schema (sky/task.py Task.from_yaml_config, sky/serve/service_spec.py) from the
 * `skypilot` package, pinned, in its virtual environment under .haru/venvs (test/support/python-tools.ts;
 * HARU_SKYPILOT_PYTHON names another python). The environment is made on first use; where that cannot be
 * done the tests are skipped and say why.
 */
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { Domain } from '../schemas/entities';
import { fleetLayoutSchema } from '../schemas/layout';
import { ensurePythonTool, SKYPILOT } from '../test/support/python-tools';
import { renderServiceYaml, renderTaskYaml } from './sky-yaml';

jest.setTimeout(120_000);

const REPO = path.resolve(__dirname, '..');
const SCRIPT = path.join(REPO, 'test/fixtures/sky/read-task-yaml.py');
/** A python with SkyPilot importable (its pinned venv, made on first use); or why there is none. */
function skypilotPython(): { python: string } | { why: string } {
  const python = process.env.HARU_SKYPILOT_PYTHON;
  if (python) {
    const importable = spawnSync(python, ['-c', 'import sky'], { encoding: 'utf8' }).status === 0;
    return importable ? { python } : { why: `HARU_SKYPILOT_PYTHON=${python} cannot import sky` };
  }
  try {
    return { python: path.join(ensurePythonTool(SKYPILOT), 'bin', 'python') };
  } catch (err) {
    return { why: (err as Error).message };
  }
}

const found = skypilotPython();
if ('why' in found) {
  // Loud on purpose: a skipped check must never read as a passed one.
  process.stderr.write(`\nSKIPPED: rendered YAML not checked against SkyPilot's parser: ${found.why}\n\n`);
}
const describeWithSkypilot = 'python' in found ? describe : describe.skip;

const production = fleetLayoutSchema.parse(
  JSON.parse(readFileSync(path.join(REPO, 'examples/production.layout.json'), 'utf8')),
);

/** A domain row from a layout domain, as the renderer gets it. */
const row = (d: (typeof production.domains)[number], over: Partial<Domain> = {}): Domain => ({
  id: '40000000-0000-4000-8000-00000000000a',
  fleetId: '40000000-0000-4000-8000-000000000001',
  slug: d.slug,
  displayName: d.displayName ?? d.slug,
  provider: d.provider,
  placement: d.placement,
  supervisorUrl: d.supervisorUrl,
  servingBaseUrl: d.servingBaseUrl ?? null,
  launch: d.launch ?? null,
  state: 'provisioning',
  stateChangedAt: '2026-01-01T00:00:00.000Z',
  lastSeenAt: null,
  consecutiveFailures: 0,
  lastError: null,
  ...over,
});

interface Read {
  error?: string;
  name: string;
  workdir: string | null;
  setup: string | null;
  run: string | null;
  envs: Record<string, string>;
  resources: {
    cloud: string | null;
    region: string | null;
    accelerators: Record<string, number> | null;
    use_spot: boolean;
    ports: string[] | null;
    image_id: Record<string, string> | null;
  }[];
  service?: { ports: string; readiness_path: string; initial_delay_seconds: number; min_replicas: number };
}

/** What SkyPilot reads from each YAML (run from the repository root, where `workdir: .` points). */
function readWithSkypilot(yamls: Record<string, string>): Record<string, Read> {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'haru-sky-yaml-'));
  try {
    const files = Object.entries(yamls).map(([name, yaml]) => {
      const file = path.join(dir, `${name}.yaml`);
      writeFileSync(file, yaml);
      return [name, file] as const;
    });
    const r = spawnSync((found as { python: string }).python, [SCRIPT, ...files.map(([, f]) => f)], {
      cwd: REPO,
      encoding: 'utf8',
      timeout: 110_000,
    });
    const out = JSON.parse(r.stdout) as Record<string, Read>;
    return Object.fromEntries(files.map(([name, file]) => [name, out[file]!]));
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

describeWithSkypilot("rendered YAML read by SkyPilot's own parser", () => {
  const [first] = production.domains;
  // One SkyPilot process for every document: importing sky takes seconds.
  let read: Record<string, Read>;
  beforeAll(() => {
    read = readWithSkypilot({
      ...Object.fromEntries(
        production.domains.map((d) => [d.slug, renderTaskYaml({ domain: row(d), fleetSlug: production.fleet.slug })]),
      ),
      anyCloud: renderTaskYaml({
        domain: row(first!, {
          placement: { region: 'us-east-1', accelerators: 'H100:2' },
          launch: { ...first!.launch!, imageId: 'docker:vllm/vllm-openai:v0.10.1' },
        }),
        fleetSlug: 'prod',
      }),
      service: renderServiceYaml({ domain: row(first!, { provider: 'skyserve' }), fleetSlug: 'prod' }),
      bad: 'name: x\nresources:\n  infra: nowhere-cloud\nrun: echo\n',
    });
  });

  it('reads both production domains as shipped: workdir, setup, run, envs, resources', () => {
    for (const d of production.domains) {
      const task = read[d.slug]!;
      expect(task.error).toBeUndefined();
      expect(task.name).toBe(`haru-prod-${d.slug}`);
      expect(task.workdir).toBe(REPO);
      expect(task.setup).toBe(d.launch!.setup);
      expect(task.run).toBe(d.launch!.run);
      expect(task.envs).toMatchObject({ HARU_DOMAIN: d.slug, HARU_GPU_VENDOR: 'nvidia' });
      // A launch's secrets reach SkyPilot as `--secret NAME` at launch, never in the task: none is among its envs
      // (the run may name the variable it reads), and the supervisor's token is nowhere in it.
      expect(d.launch!.secrets).toContain('HF_TOKEN');
      for (const name of d.launch!.secrets!) expect(task.envs).not.toHaveProperty(name);
      expect(JSON.stringify(task)).not.toMatch(/HARU_SUPERVISOR_TOKEN/);
      expect(task.resources).toEqual([
        expect.objectContaining({
          cloud: d.placement.cloud === 'aws' ? 'AWS' : 'GCP',
          region: d.placement.region,
          accelerators: { H100: 2 },
          ports: ['443', '8701'],
        }),
      ]);
    }
  });

  it('reads a region without a cloud as that region on any cloud, and a docker image', () => {
    expect(read.anyCloud!.error).toBeUndefined();
    expect(read.anyCloud!.resources[0]).toMatchObject({
      cloud: null,
      region: 'us-east-1',
      image_id: { 'us-east-1': 'docker:vllm/vllm-openai:v0.10.1' },
    });
  });

  it('reads a skyserve domain: the service section as `sky serve up` does', () => {
    expect(read.service!.error).toBeUndefined();
    expect(read.service!.service).toEqual({
      ports: '8701',
      readiness_path: '/healthz',
      initial_delay_seconds: 1200,
      min_replicas: 1,
      max_replicas: null,
    });
  });

  it('refuses what SkyPilot refuses (the check is not a rubber stamp)', () => {
    expect(read.bad!.error).toBeDefined();
  });
});
