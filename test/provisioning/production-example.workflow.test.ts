/**
 * examples/production.layout.json as shipped, provisioned by provisionDomainWorkflow through the fake `sky`,
 * which runs the task as SkyPilot does: `setup` and `run` in a directory holding only the shipped workdir
 * (nothing of this checkout's node_modules). The setup installs Haru's dependencies there, the run starts
 * the GPU's vLLM servers one after another (the fake `vllm` and `nvidia-smi` of sim/bin stand in for the
 * image's) and the supervisor, and the workflow waits until that supervisor reports every model.
 */
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { skyNameFor } from '../../drivers/sky-yaml';
import { fleetLayoutSchema } from '../../schemas/layout';
import { supervisorStatusSchema } from '../../schemas/supervisor';
import { writeInventory } from '../../sim/gpu-state';
import { provisionWorkflowId } from '../../workflows/definitions';
import { eventually, REPO_ROOT, startProvisioningRig, type ProvisioningRig } from './support';

// `npm ci --omit=dev` in the shipped directory is most of it.
jest.setTimeout(420_000);

const TOKEN = 'production-example-token-5d2e';
const HF_TOKEN = 'hf_production_example_0c4b';
/** The active domain's own supervisor token, from the variable its layout names (`supervisor.tokenEnv`). */
const DOMAIN_TOKEN = 'production-example-aws-use1-token-9a7f';
const layout = fleetLayoutSchema.parse(
  JSON.parse(readFileSync(path.join(REPO_ROOT, 'examples/production.layout.json'), 'utf8')),
);
const domain = layout.domains.find((d) => d.slug === layout.fleet.activeDomain)!;
const skyName = skyNameFor(layout.fleet.slug, domain.slug);
/** The example's fixed ports: the supervisor's and the three vLLM servers of examples/supervisor.json. */
const PORTS = [8701, 8001, 8002, 8003];

const portFree = (port: number) =>
  new Promise<boolean>((resolve) => {
    const server = net.createServer();
    server.once('error', () => resolve(false));
    server.listen(port, '0.0.0.0', () => server.close(() => resolve(true)));
  });

let rig: ProvisioningRig;
let gpuState: string;

beforeAll(async () => {
  const busy = [];
  for (const port of PORTS) if (!(await portFree(port))) busy.push(port);
  if (busy.length) throw new Error(`the production example listens on fixed ports, and ${busy.join(', ')} are taken`);
  gpuState = mkdtempSync(path.join(os.tmpdir(), 'haru-prod-gpu-'));
  writeInventory(gpuState, {
    gpus: [0, 1].map((index) => ({
      index,
      uuid: `GPU-prod-${index}`,
      name: 'NVIDIA H100 80GB HBM3',
      totalMiB: 81_559,
    })),
    mig: null,
    baselineMiB: 4,
    fault: null,
  });
  rig = await startProvisioningRig(layout, 'production-example', TOKEN, {
    // What the worker's environment holds for this layout: the secret it names, and the host image's GPU.
    HF_TOKEN,
    [domain.supervisor!.tokenEnv!]: DOMAIN_TOKEN,
    HARU_SIM_GPU_STATE: gpuState,
    // The fake host's HOME is empty: let npm find the packages this machine already downloaded.
    npm_config_cache: process.env.npm_config_cache ?? path.join(os.homedir(), '.npm'),
  });
});

afterAll(async () => {
  await rig?.stop();
  if (gpuState) rmSync(gpuState, { recursive: true, force: true });
});

it('starts the active domain from the shipped workdir, vLLM servers one after another, and reaches its supervisor', async () => {
  const result = await rig.client.workflow.execute('provisionDomainWorkflow', {
    workflowId: provisionWorkflowId(rig.ids[domain.slug]!),
    taskQueue: rig.taskQueue,
    args: [{ domainId: rig.ids[domain.slug]!, launchTimeoutMs: 360_000, readyTimeoutMs: 120_000 }],
  });
  expect(result).toMatchObject({ state: 'ready', skyName, standby: false });

  // The launch: the YAML ships the checkout and names the secrets; their values went only to the host.
  const launch = rig.sky.calls().find((c) => c.argv[0] === 'launch')!;
  expect(launch.argv).toEqual(expect.arrayContaining(['--secret', 'HARU_SUPERVISOR_TOKEN', 'HF_TOKEN']));
  expect(launch.secrets).toEqual({ HARU_SUPERVISOR_TOKEN: DOMAIN_TOKEN, HF_TOKEN });
  expect(launch.yaml).toMatch(/^workdir: \.$/m);
  expect(launch.yaml).not.toContain(HF_TOKEN);
  expect(launch.yaml).not.toContain(DOMAIN_TOKEN);

  // It ran in the shipped copy, whose node_modules the setup installed (this checkout's were not shipped).
  const shipped = path.join(rig.sky.stateDir, 'hosts', skyName, 'sky_workdir');
  expect(existsSync(path.join(shipped, 'bin/haru.js'))).toBe(true);
  expect(existsSync(path.join(shipped, 'node_modules/tsx/package.json'))).toBe(true);
  expect(existsSync(path.join(shipped, 'node_modules/jest'))).toBe(false);

  // The two servers of GPU 0 came up one after the other (the script notices readiness at its next poll:
  // the supervisor may have seen the second one first).
  const gpu0Ready = () =>
    [...rig.sky.log(skyName).matchAll(/vllm-start: (\S+) ready/g)].map((m) => m[1]).filter((n) => n !== 'qwen-32b');
  await eventually('both GPU 0 servers reported ready', () => gpu0Ready().length === 2);
  expect(gpu0Ready()).toEqual(['qwen-0.5b', 'llama-1b']);

  // Haru now talks to the supervisor where sky says the port is exposed, with the token it sent.
  const row = (await rig.db.store.domains.get(rig.ids[domain.slug]!))!;
  expect(row.state).toBe('ready');
  expect(row.supervisorUrl).toBe('http://127.0.0.1:8701');
  const res = await fetch(`${row.supervisorUrl}/v1/status`, { headers: { authorization: `Bearer ${DOMAIN_TOKEN}` } });
  expect(res.status).toBe(200);
  const status = supervisorStatusSchema.parse(await res.json());
  expect(status.models.map((m) => m.name).sort()).toEqual(['llama-1b', 'qwen-0.5b', 'qwen-32b']);
});
