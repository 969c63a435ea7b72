/**
 * provisionDomainWorkflow and teardownDomainWorkflow on the run's Temporal dev server, a real Postgres
 * database and a real worker, with the fake `sky` (sim/bin/sky) on PATH: its `launch` runs the task's
 * `run`, which here is `haru sim domain`, so the supervisor the workflow waits for really answers, with
 * the token that reached it only through `--secret`.
 */
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { type Client, WorkflowFailedError } from '@temporalio/client';
import { ApplicationFailure, defaultPayloadConverter } from '@temporalio/common';
import { Worker } from '@temporalio/worker';
import { issuedSupervisorToken } from '../../clients/supervisor-access';
import type { TestDatabase } from '../../db/testing';
import { skyNameFor } from '../../drivers/sky-yaml';
import { fleetLayoutSchema, type FleetLayout } from '../../schemas/layout';
import type { SupervisorStatus } from '../../schemas/supervisor';
import { SIM_TRAINER } from '../../sim/domain';
import {
  provisionWorkflowId,
  teardownWorkflowId,
  type ProvisionDomainInput,
  type TeardownDomainInput,
} from '../../workflows/definitions';
import { freePort } from '../support/ports';
import { workflowBundle } from '../workflows/support/bundle';
import { eventually, CLI_BIN, startProvisioningRig, type FakeSky, type ProvisioningRig } from './support';

jest.setTimeout(180_000);

const TOKEN = 'prov-test-token-7c1e';
const MODEL = 'llama-1b';
const POLICY = {
  autoFailover: false,
  heartbeatIntervalMs: 200,
  heartbeatStaleMs: 3_000,
  trainingStopGraceMs: 2_000,
  stopTrainingTimeoutMs: 20_000,
  sleepTimeoutMs: 30_000,
  startTrainingTimeoutMs: 30_000,
};

let rig: ProvisioningRig;
let client: Client;
let db: TestDatabase;
let sky: FakeSky;
let taskQueue: string;
let stateRoot: string;
let layout: FleetLayout;
let fleetSlug: string;
const ids: Record<string, string> = {};
const supervisorUrls: Record<string, string> = {};

/** A simulated host started by the fake cluster's `run`, as a launch spec would on a real cluster. */
const simRun = (layoutFile: string, slug: string) =>
  `exec node ${CLI_BIN} sim domain --layout ${layoutFile} --domain ${slug} --state-dir ${path.join(stateRoot, slug)}`;

beforeAll(async () => {
  stateRoot = mkdtempSync(path.join(os.tmpdir(), 'haru-prov-'));
  const layoutFile = path.join(stateRoot, 'layout.json');
  fleetSlug = `prov-${process.pid}`;
  // `west` and `south` name a host nobody can reach: only the address `sky` reports after the launch
  // (where the simulated host really listens) gets Haru to their supervisors.
  const domain = async (slug: string, provider: 'skypilot' | 'skyserve', run: string | null, host = '127.0.0.1') => {
    const [supervisorPort, vllmPort] = [await freePort(), await freePort()];
    supervisorUrls[slug] = `http://127.0.0.1:${supervisorPort}`;
    return {
      slug,
      provider,
      // The service's hosts get a token of their own, issued at launch.
      ...(slug === 'south' ? { supervisor: { issueToken: true } } : {}),
      placement: { cloud: 'aws', region: 'us-east-1', accelerators: 'H100:1', useSpot: false },
      supervisorUrl: `http://${host}:${supervisorPort}`,
      launch: { run: run ?? simRun(layoutFile, slug), envs: { SIM_NOTE: `domain ${slug}` } },
      slots: [
        { kind: 'inference', gpuIndex: 0, models: [{ name: MODEL, servingUrl: `http://127.0.0.1:${vllmPort}/v1` }] },
        { kind: 'training', gpuIndex: 0, command: ['node', SIM_TRAINER], checkpointDir: 'checkpoints/gpu0' },
      ],
    };
  };
  layout = fleetLayoutSchema.parse({
    fleet: { slug: fleetSlug, activeDomain: 'east', policy: POLICY },
    domains: [
      await domain('east', 'skypilot', 'exec sleep 600'),
      await domain('west', 'skypilot', null, 'west.invalid'),
      await domain('south', 'skyserve', null, 'south.invalid'),
      await domain('north', 'skypilot', 'exec sleep 600'),
      await domain('spare', 'skypilot', 'exec sleep 600'),
    ],
  });
  writeFileSync(layoutFile, JSON.stringify(layout));

  rig = await startProvisioningRig(layout, 'provisioning', TOKEN);
  ({ db, sky, client, taskQueue } = rig);
  Object.assign(ids, rig.ids);
});

afterAll(async () => {
  await rig?.stop();
  rmSync(stateRoot, { recursive: true, force: true });
});

const provision = (slug: string, over: Partial<ProvisionDomainInput> = {}) =>
  client.workflow.start('provisionDomainWorkflow', {
    workflowId: provisionWorkflowId(ids[slug]!),
    taskQueue,
    args: [{ domainId: ids[slug]!, launchTimeoutMs: 60_000, readyTimeoutMs: 120_000, ...over }],
  });

const teardown = (slug: string, over: Partial<TeardownDomainInput> = {}) =>
  client.workflow.start('teardownDomainWorkflow', {
    workflowId: teardownWorkflowId(ids[slug]!),
    taskQueue,
    args: [{ domainId: ids[slug]!, ...over }],
  });

const domainRow = async (slug: string) => (await db.store.domains.get(ids[slug]!))!;

async function supervisorStatus(slug: string, token: string | null = TOKEN): Promise<Response> {
  return fetch(`${supervisorUrls[slug]}/v1/status`, token ? { headers: { authorization: `Bearer ${token}` } } : {});
}

/** The cause of a failed workflow, as the ApplicationFailure the workflow threw. */
async function failureOf(result: Promise<unknown>): Promise<ApplicationFailure> {
  const err = await result.then(
    () => {
      throw new Error('the workflow succeeded');
    },
    (e: unknown) => e,
  );
  expect(err).toBeInstanceOf(WorkflowFailedError);
  const cause = (err as WorkflowFailedError).cause;
  expect(cause).toBeInstanceOf(ApplicationFailure);
  return cause as ApplicationFailure;
}

describe('provisionDomainWorkflow', () => {
  it('launches a standby skypilot domain, waits for its supervisor, puts it on standby and marks it ready; teardown takes it down', async () => {
    const handle = await provision('west');
    const result = await handle.result();
    expect(result).toEqual({
      domainId: ids.west,
      state: 'ready',
      skyName: skyNameFor(fleetSlug, 'west'),
      standby: true,
    });
    expect((await domainRow('west')).state).toBe('ready');

    // The supervisor answers, with the token that travelled only as a --secret, and the host is a standby.
    expect((await supervisorStatus('west', null)).status).toBe(401);
    const status = (await (await supervisorStatus('west')).json()) as SupervisorStatus;
    expect(status.models.map((m) => [m.name, m.state])).toEqual([[MODEL, 'asleep']]);
    expect(status.training.map((t) => t.state)).toEqual(['running']);

    // The supervisor's address came from `sky status --endpoint PORT CLUSTER`, not from the layout.
    const port = new URL(supervisorUrls.west!).port;
    expect(sky.calls().map((c) => c.argv)).toContainEqual([
      'status',
      '--endpoint',
      port,
      skyNameFor(fleetSlug, 'west'),
    ]);
    expect((await domainRow('west')).supervisorUrl).toBe(supervisorUrls.west);

    const [launch] = sky.calls().filter((c) => c.argv[0] === 'launch');
    expect(launch!.argv.slice(0, 7)).toEqual([
      'launch',
      '--cluster',
      skyNameFor(fleetSlug, 'west'),
      '--yes',
      '--detach-run',
      '--secret',
      'HARU_SUPERVISOR_TOKEN',
    ]);
    expect(launch!.secrets).toEqual({ HARU_SUPERVISOR_TOKEN: TOKEN });
    expect(launch!.argv.join(' ')).not.toContain(TOKEN);
    expect(launch!.yaml).not.toContain(TOKEN);
    expect(launch!.yaml).toContain('infra: aws/us-east-1');
    expect(launch!.yaml).toContain(`HARU_DOMAIN: "west"`);
    const events = await db.store.events.list((await domainRow('west')).fleetId);
    expect(events.filter((e) => e.domainId === ids.west).map((e) => e.type)).toContain('domain.provisioned');

    const downHandle = await teardown('west');
    const down = await downHandle.result();
    expect(down).toEqual({ domainId: ids.west, state: 'stopped', result: 'down' });
    // Both real histories replay with the current workflow code (a changed command sequence would throw).
    for (const h of [handle, downHandle]) {
      await Worker.runReplayHistory({ workflowBundle: workflowBundle() }, await h.fetchHistory(), h.workflowId);
    }
    expect((await domainRow('west')).state).toBe('stopped');
    expect(sky.clusters()[skyNameFor(fleetSlug, 'west')]).toBeUndefined();
    // The host is gone: `sky down` ended the simulated domain the cluster's run had started.
    await eventually('the supervisor to stop answering', () =>
      supervisorStatus('west').then(
        () => false,
        () => true,
      ),
    );
  });

  it('brings a skyserve domain up with `sky serve up` and a service section, and down with `sky serve down`', async () => {
    const result = await (await provision('south')).result();
    expect(result.state).toBe('ready');
    const [up] = sky.calls().filter((c) => c.argv[0] === 'serve' && c.argv[1] === 'up');
    expect(up!.argv.slice(0, 7)).toEqual([
      'serve',
      'up',
      '--service-name',
      skyNameFor(fleetSlug, 'south'),
      '--yes',
      '--secret',
      'HARU_SUPERVISOR_TOKEN',
    ]);
    expect(up!.yaml).toMatch(/service:\n {2}ports: \d+\n {2}readiness_probe:\n {4}path: \/healthz/);
    // Its token was issued for it: derived from the fleet's and its id, sent only as the launch's secret; the
    // fleet's own token opens nothing there.
    const issued = issuedSupervisorToken(TOKEN, ids.south!);
    expect(up!.secrets).toEqual({ HARU_SUPERVISOR_TOKEN: issued });
    expect(issued).not.toBe(TOKEN);
    expect(issued).not.toBe(issuedSupervisorToken(TOKEN, ids.west!));
    expect((await supervisorStatus('south', TOKEN)).status).toBe(401);
    expect((await supervisorStatus('south', issued)).status).toBe(200);
    expect(await sky.cli.serveStatus(skyNameFor(fleetSlug, 'south'))).toMatchObject({ status: 'READY' });
    expect(sky.calls().map((c) => c.argv)).toContainEqual([
      'serve',
      'status',
      '--endpoint',
      skyNameFor(fleetSlug, 'south'),
    ]);
    expect((await domainRow('south')).supervisorUrl).toBe(supervisorUrls.south);

    expect((await (await teardown('south')).result()).result).toBe('down');
    expect(sky.calls().some((c) => c.argv.join(' ') === `serve down ${skyNameFor(fleetSlug, 'south')} --yes`)).toBe(
      true,
    );
    expect((await domainRow('south')).state).toBe('stopped');
  });

  it('purges a service SkyServe reports failed (its plain down leaves it up) and records that it is gone', async () => {
    const name = skyNameFor(fleetSlug, 'south');
    expect((await (await provision('south')).result()).state).toBe('ready');
    // The controller marks the service failed: a plain `sky serve down` now skips it and exits 0.
    const servicesFile = path.join(sky.stateDir, 'services.json');
    const services = JSON.parse(readFileSync(servicesFile, 'utf8')) as Record<string, { status: string; pid: number }>;
    services[name]!.status = 'CONTROLLER_FAILED';
    writeFileSync(servicesFile, JSON.stringify(services));
    const pid = services[name]!.pid;

    expect((await (await teardown('south')).result()).result).toBe('down');
    const downs = sky
      .calls()
      .map((c) => c.argv.join(' '))
      .filter((a) => a.startsWith(`serve down ${name}`));
    expect(downs.slice(-2)).toEqual([`serve down ${name} --yes`, `serve down ${name} --yes --purge`]);
    expect(sky.services()[name]).toBeUndefined();
    expect(() => process.kill(pid, 0)).toThrow();
    expect((await domainRow('south')).state).toBe('stopped');
    const events = await db.store.events.list(rig.fleetId, { limit: 1_000 });
    const checked = events.filter((e) => e.domainId === ids.south && e.type === 'domain.teardown_checked').at(-1);
    expect(checked?.data).toMatchObject({
      command: 'sky serve down',
      result: 'down',
      purged: true,
      observed: { gone: true, status: null },
    });
  });

  it('marks the domain failed with the reason when the launch fails', async () => {
    sky.script({
      launch: [
        {
          exitCode: 1,
          stderr:
            "sky.exceptions.ResourcesUnavailableError: Failed to provision all possible launchable resources. Relax the task's resource requirements: 1x AWS({'H100': 1})\n",
        },
      ],
    });
    const failure = await failureOf((await provision('spare')).result());
    expect(failure.type).toBe('ProvisioningFailed');
    expect(failure.message).toMatch(/failed at launch: .*exited with code 1.*ResourcesUnavailableError/);
    const row = await domainRow('spare');
    expect(row.state).toBe('failed');
    expect(row.lastError).toMatch(/^launch: .*ResourcesUnavailableError/);
  });

  it('heartbeats a slow launch with its progress, and a teardown cancels it and leaves the domain stopped', async () => {
    sky.script({ launch: [{ delayMs: 120_000, progressEveryMs: 200 }] });
    const handle = await provision('north');
    const details = await eventually(
      'a launch heartbeat with the CLI progress',
      async () => {
        const pending = (await handle.describe()).raw.pendingActivities ?? [];
        const payload = pending[0]?.heartbeatDetails?.payloads?.[0];
        const value = payload
          ? defaultPayloadConverter.fromPayload<{ waitingFor: string; lastOutput: string }>(payload)
          : null;
        return value?.lastOutput.includes('still provisioning') ? value : null;
      },
      60_000,
    );
    expect(details.waitingFor).toBe(`sky launch ${skyNameFor(fleetSlug, 'north')}`);
    expect((await domainRow('north')).state).toBe('provisioning');

    const down = await (await teardown('north')).result();
    expect(down.state).toBe('stopped');
    await eventually(
      'the provisioning to end cancelled',
      async () => (await handle.describe()).status.name === 'CANCELLED',
    );
    // The cancelled provisioning left the domain to the teardown: stopped, not failed.
    const row = await domainRow('north');
    expect(row.state).toBe('stopped');
    expect(sky.clusters()[skyNameFor(fleetSlug, 'north')]).toBeUndefined();
  });

  it('refuses a domain that is already ready without launching anything', async () => {
    await db.store.domains.transition(ids.east!, 'ready');
    const before = sky.calls().length;
    const failure = await failureOf((await provision('east')).result());
    expect(failure.type).toBe('InvalidTarget');
    expect(failure.message).toMatch(/east is ready: tear it down/);
    expect(sky.calls()).toHaveLength(before);
  });
});

describe('teardownDomainWorkflow', () => {
  it('refuses the active domain and changes nothing', async () => {
    await db.store.domains.transition(ids.east!, 'ready');
    const before = sky.calls().length;
    const failure = await failureOf((await teardown('east')).result());
    expect(failure.type).toBe('InvalidTarget');
    expect(failure.message).toMatch(/east is the active domain/);
    expect((await domainRow('east')).state).toBe('ready');
    expect(sky.calls()).toHaveLength(before);
  });
});
