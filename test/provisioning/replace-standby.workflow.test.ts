/**
 * `replaceFailedStandby` end to end on the run's Temporal dev server, a real Postgres database and a real
 * worker, with the fake `sky` on PATH: both domains are provisioned (their launches start simulated
 * hosts), the fleet monitor watches them, the standby's host goes away, the monitor fails it and, after
 * the grace, tears it down and provisions it again, and the new host ends up a ready standby.
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { Client } from '@temporalio/client';
import { Worker } from '@temporalio/worker';
import type { TestDatabase } from '../../db/testing';
import { skyNameFor } from '../../drivers/sky-yaml';
import { fleetLayoutSchema } from '../../schemas/layout';
import type { SupervisorStatus } from '../../schemas/supervisor';
import { SIM_TRAINER } from '../../sim/domain';
import {
  monitorWorkflowId,
  provisionWorkflowId,
  teardownWorkflowId,
  type FleetMonitorInput,
} from '../../workflows/definitions';
import { DEFAULT_WATCH_SHARDS } from '../../core/watch-shard';
import { ensureWatchShards } from '../../workers/start';
import { freePort } from '../support/ports';
import { workflowBundle } from '../workflows/support/bundle';
import { eventually, CLI_BIN, startProvisioningRig, type FakeSky, type ProvisioningRig } from './support';

jest.setTimeout(240_000);

const TOKEN = 'replace-test-token-41d2';
const MODEL = 'llama-1b';
const GRACE_MS = 1_500;

let rig: ProvisioningRig;
let client: Client;
let db: TestDatabase;
let sky: FakeSky;
let taskQueue: string;
let stateRoot: string;
let fleetId: string;
let fleetSlug: string;
const ids: Record<string, string> = {};
const supervisorUrls: Record<string, string> = {};

beforeAll(async () => {
  stateRoot = mkdtempSync(path.join(os.tmpdir(), 'haru-replace-'));
  const layoutFile = path.join(stateRoot, 'layout.json');
  fleetSlug = `repl-${process.pid}`;
  const domain = async (slug: string) => {
    const [supervisorPort, vllmPort] = [await freePort(), await freePort()];
    supervisorUrls[slug] = `http://127.0.0.1:${supervisorPort}`;
    const stateDir = path.join(stateRoot, slug);
    return {
      slug,
      provider: 'skypilot',
      placement: { cloud: 'aws', region: 'us-east-1', accelerators: 'H100:1' },
      supervisorUrl: supervisorUrls[slug],
      launch: {
        run: `exec node ${CLI_BIN} sim domain --layout ${layoutFile} --domain ${slug} --state-dir ${stateDir}`,
      },
      slots: [
        { kind: 'inference', gpuIndex: 0, models: [{ name: MODEL, servingUrl: `http://127.0.0.1:${vllmPort}/v1` }] },
        { kind: 'training', gpuIndex: 0, command: ['node', SIM_TRAINER], checkpointDir: 'checkpoints/gpu0' },
      ],
    };
  };
  const layout = fleetLayoutSchema.parse({
    fleet: {
      slug: fleetSlug,
      activeDomain: 'east',
      policy: {
        autoFailover: false,
        heartbeatIntervalMs: 200,
        heartbeatStaleMs: 3_000,
        failureThreshold: 3,
        trainingStopGraceMs: 2_000,
        stopTrainingTimeoutMs: 20_000,
        sleepTimeoutMs: 30_000,
        startTrainingTimeoutMs: 30_000,
        replaceFailedStandby: { enabled: true, graceMs: GRACE_MS },
      },
    },
    domains: [await domain('east'), await domain('west')],
  });
  writeFileSync(layoutFile, JSON.stringify(layout));

  rig = await startProvisioningRig(layout, 'replace-standby', TOKEN);
  ({ db, sky, client, taskQueue } = rig);
  Object.assign(ids, rig.ids);
  fleetId = rig.fleetId;
});

afterAll(async () => {
  await client?.workflow
    .getHandle(monitorWorkflowId(fleetId))
    .terminate('test over')
    .catch(() => undefined);
  await rig?.stop();
  rmSync(stateRoot, { recursive: true, force: true });
});

const provision = (slug: string) =>
  client.workflow.execute('provisionDomainWorkflow', {
    workflowId: provisionWorkflowId(ids[slug]!),
    taskQueue,
    args: [{ domainId: ids[slug]!, launchTimeoutMs: 60_000, readyTimeoutMs: 120_000 }],
  });

const stateOf = async (slug: string) => (await db.store.domains.get(ids[slug]!))!.state;
const launchesOf = (slug: string) =>
  sky.calls().filter((c) => c.argv[0] === 'launch' && c.argv.includes(skyNameFor(fleetSlug, slug))).length;

async function standbyStatus(): Promise<SupervisorStatus | null> {
  try {
    const res = await fetch(`${supervisorUrls.west}/v1/status`, { headers: { authorization: `Bearer ${TOKEN}` } });
    return res.ok ? ((await res.json()) as SupervisorStatus) : null;
  } catch {
    return null;
  }
}

it('tears a skypilot standby that stayed failed past the grace down and provisions a ready replacement', async () => {
  await Promise.all([provision('east'), provision('west')]);
  expect([await stateOf('east'), await stateOf('west')]).toEqual(['ready', 'ready']);
  expect(launchesOf('west')).toBe(1);

  const monitor = await client.workflow.start('fleetMonitorWorkflow', {
    workflowId: monitorWorkflowId(fleetId),
    taskQueue,
    args: [{ fleetId } satisfies FleetMonitorInput],
  });
  // The shards watch it, signalling its monitor twice a second when nothing is due (each look plans the replacement).
  await ensureWatchShards(client, taskQueue, DEFAULT_WATCH_SHARDS, { fleetCheckpointMs: 500 });

  // The standby's host goes away: the fake cluster's run (the simulated host) is stopped behind sky's back.
  const pid = sky.clusters()[skyNameFor(fleetSlug, 'west')]!.pid!;
  process.kill(-pid, 'SIGTERM');
  await eventually('the monitor to fail the standby', async () => (await stateOf('west')) === 'failed', 60_000);
  expect(launchesOf('west')).toBe(1);

  await eventually(
    'a second launch of the standby, and the replacement ready',
    async () => launchesOf('west') === 2 && (await stateOf('west')) === 'ready',
    180_000,
  );

  // It went down through the teardown workflow and came back through the provisioning one, by their ids.
  expect(sky.calls().some((c) => c.argv.join(' ') === `down ${skyNameFor(fleetSlug, 'west')} --yes`)).toBe(true);
  expect(await client.workflow.getHandle(teardownWorkflowId(ids.west!)).result()).toEqual({
    domainId: ids.west,
    state: 'stopped',
    result: 'down',
  });
  const reprovision = client.workflow.getHandle(provisionWorkflowId(ids.west!));
  expect(await reprovision.result()).toMatchObject({ state: 'ready', standby: true });
  expect((await reprovision.describe()).parentExecution?.workflowId).toBe(monitor.workflowId);

  const events = await db.store.events.list(fleetId, { limit: 1_000 });
  const replacements = events.filter((e) => e.domainId === ids.west && e.type === 'domain.replacement');
  expect(replacements.map((e) => e.data.step)).toEqual(['teardown', 'provision']);
  // Not before the grace: the teardown came at least GRACE_MS after the monitor failed the standby.
  const failed = events.find((e) => e.domainId === ids.west && e.type === 'domain.state' && e.data.to === 'failed')!;
  expect(Date.parse(replacements[0]!.createdAt) - Date.parse(failed.createdAt)).toBeGreaterThanOrEqual(GRACE_MS);
  // The active was never touched.
  expect(events.some((e) => e.domainId === ids.east && e.type === 'domain.replacement')).toBe(false);
  expect(await stateOf('east')).toBe('ready');

  // The monitor's history (with the patch marker and both children) replays with the current code.
  await Worker.runReplayHistory({ workflowBundle: workflowBundle() }, await monitor.fetchHistory(), monitor.workflowId);

  // The new host is a standby again: models asleep, training running.
  const status = await eventually('the new standby to answer', standbyStatus, 30_000);
  expect(status.models.map((m) => [m.name, m.state])).toEqual([[MODEL, 'asleep']]);
  expect(status.training.map((t) => t.state)).toEqual(['running']);
});
