/**
 * examples/production.layout.json as shipped, provisioned by provisionDomainWorkflow through the fake `sky`,
 * which runs the task as SkyPilot does: `setup` and `run` in a directory holding only the shipped workdir
 * (nothing of this checkout's node_modules). The setup installs Haru's dependencies there, the run starts
 * the GPU's vLLM servers one after another (the fake `vllm` and `nvidia-smi` of sim/bin stand in for the
 * image's) and the supervisor, and the workflow waits until that supervisor reports every model. The domain's
 * supervisor certificate is issued by the worker from a test CA at the launch and reaches the host only as
 * `--secret`s; the host serves HTTPS with it at the address `sky` reports (an IP), and the worker verifies it
 * against the CA under the domain's `serverName`.
 */
import { X509Certificate } from 'node:crypto';
import { chmodSync, existsSync, mkdtempSync, readFileSync, rmSync, statSync } from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { Agent, fetch as undiciFetch } from 'undici';
import { loadSupervisorCertificateIssuer } from '../../activities/provisioning-certificate';
import { issuedSupervisorToken } from '../../clients/supervisor-access';
import { loadSupervisorClientTls } from '../../clients/supervisor-tls';
import { skyNameFor } from '../../drivers/sky-yaml';
import { fleetLayoutSchema } from '../../schemas/layout';
import { supervisorStatusSchema } from '../../schemas/supervisor';
import { writeInventory } from '../../sim/gpu-state';
import { provisionWorkflowId } from '../../workflows/definitions';
import { createTestPki, type TestPki } from '../support/pki';
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
let pki: TestPki;

beforeAll(async () => {
  const busy = [];
  for (const port of PORTS) if (!(await portFree(port))) busy.push(port);
  if (busy.length) throw new Error(`the production example listens on fixed ports, and ${busy.join(', ')} are taken`);
  gpuState = mkdtempSync(path.join(os.tmpdir(), 'haru-prod-gpu-'));
  // The fleet's supervisor CA, as the worker's HARU_SUPERVISOR_CA_FILE and HARU_SUPERVISOR_CA_KEY_FILE name it.
  pki = createTestPki();
  const caKey = path.join(pki.dir, 'ca.key');
  chmodSync(caKey, 0o600);
  const caEnv = { HARU_SUPERVISOR_CA_FILE: pki.ca, HARU_SUPERVISOR_CA_KEY_FILE: caKey };
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
  rig = await startProvisioningRig(
    layout,
    'production-example',
    TOKEN,
    {
      // What the worker's environment holds for this layout: the secret it names, and the host image's GPU.
      HF_TOKEN,
      [domain.supervisor!.tokenEnv!]: DOMAIN_TOKEN,
      HARU_SIM_GPU_STATE: gpuState,
      // The fake host's HOME is empty: let npm find the packages this machine already downloaded.
      npm_config_cache: process.env.npm_config_cache ?? path.join(os.homedir(), '.npm'),
    },
    {
      supervisorTls: loadSupervisorClientTls(caEnv),
      supervisorCertificates: loadSupervisorCertificateIssuer(caEnv),
    },
  );
});

afterAll(async () => {
  await rig?.stop();
  if (gpuState) rmSync(gpuState, { recursive: true, force: true });
  if (pki) rmSync(pki.dir, { recursive: true, force: true });
});

it('starts the active domain from the shipped workdir, vLLM servers one after another, and reaches its supervisor over verified HTTPS', async () => {
  const result = await rig.client.workflow.execute('provisionDomainWorkflow', {
    workflowId: provisionWorkflowId(rig.ids[domain.slug]!),
    taskQueue: rig.taskQueue,
    args: [{ domainId: rig.ids[domain.slug]!, launchTimeoutMs: 360_000, readyTimeoutMs: 120_000 }],
  });
  expect(result).toMatchObject({ state: 'ready', skyName, standby: false });

  // The launch: the YAML ships the checkout and names the secrets; their values went only to the host.
  const launch = rig.sky.calls().find((c) => c.argv[0] === 'launch')!;
  expect(launch.argv).toEqual(
    expect.arrayContaining([
      ...['--secret', 'HARU_SUPERVISOR_TOKEN', 'HF_TOKEN'],
      ...['HARU_SUPERVISOR_TLS_CERT_B64', 'HARU_SUPERVISOR_TLS_KEY_B64'],
    ]),
  );
  const { HARU_SUPERVISOR_TLS_CERT_B64: certB64, HARU_SUPERVISOR_TLS_KEY_B64: keyB64, ...others } = launch.secrets!;
  // The host's token was issued for it (supervisor.issueToken), from the domain's token source and its id: the
  // worker's own token never left it.
  const hostToken = issuedSupervisorToken(DOMAIN_TOKEN, rig.ids[domain.slug]!);
  expect(others).toEqual({ HARU_SUPERVISOR_TOKEN: hostToken, HF_TOKEN });
  expect(launch.yaml).toMatch(/^workdir: \.$/m);
  for (const secret of [HF_TOKEN, DOMAIN_TOKEN, hostToken, certB64!, keyB64!]) {
    expect(launch.yaml).not.toContain(secret);
  }

  // The certificate: issued by the fleet's CA for the domain's stable name, recorded without its key.
  const issued = new X509Certificate(Buffer.from(certB64!, 'base64'));
  expect(issued.verify(new X509Certificate(readFileSync(pki.ca)).publicKey)).toBe(true);
  expect(issued.subjectAltName).toBe(`DNS:${domain.supervisor!.serverName}`);
  const events = await rig.db.store.events.list(rig.fleetId, { limit: 1_000 });
  const event = events.find((e) => e.type === 'domain.certificate_issued');
  expect(event?.data).toMatchObject({ serverName: 'aws-use1.gpu.example.com', serial: issued.serialNumber });
  expect(JSON.stringify(events)).not.toContain(keyB64!);

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

  // The host wrote them to files only its user reads and serves HTTPS with them.
  // (in the fake host's HOME, which is the fake `sky`'s: the parent of its state dir)
  const tlsDir = path.join(path.dirname(rig.sky.stateDir), '.haru', 'tls');
  expect(statSync(path.join(tlsDir, 'supervisor.key')).mode & 0o777).toBe(0o600);
  expect(readFileSync(path.join(tlsDir, 'supervisor.pem'), 'utf8')).toBe(
    Buffer.from(certB64!, 'base64').toString('utf8'),
  );

  // Haru now talks to the supervisor over HTTPS where sky says the port is exposed (an IP address), with the
  // token it issued, checking the certificate against the CA under the domain's name.
  const row = (await rig.db.store.domains.get(rig.ids[domain.slug]!))!;
  expect(row.state).toBe('ready');
  expect(row.supervisorUrl).toBe('https://127.0.0.1:8701');
  const verified = new Agent({ connect: { ca: readFileSync(pki.ca), servername: domain.supervisor!.serverName } });
  const headers = { authorization: `Bearer ${hostToken}` };
  const res = await undiciFetch(`${row.supervisorUrl}/v1/status`, { headers, dispatcher: verified });
  expect(res.status).toBe(200);
  const withSource = { authorization: `Bearer ${DOMAIN_TOKEN}` };
  expect(
    (await undiciFetch(`${row.supervisorUrl}/v1/status`, { headers: withSource, dispatcher: verified })).status,
  ).toBe(401);
  const status = supervisorStatusSchema.parse(await res.json());
  expect(status.models.map((m) => m.name).sort()).toEqual(['llama-1b', 'qwen-0.5b', 'qwen-32b']);
  // The same certificate does not pass for another name, nor against another CA.
  const wrongName = new Agent({ connect: { ca: readFileSync(pki.ca), servername: 'gcp-usc1.gpu.example.com' } });
  const otherCa = new Agent({ connect: { ca: readFileSync(pki.otherCa), servername: domain.supervisor!.serverName } });
  await expect(undiciFetch(`${row.supervisorUrl}/healthz`, { dispatcher: wrongName })).rejects.toThrow();
  await expect(undiciFetch(`${row.supervisorUrl}/healthz`, { dispatcher: otherCa })).rejects.toThrow();
  await Promise.all([verified, wrongName, otherCa].map((a) => a.close()));
});
