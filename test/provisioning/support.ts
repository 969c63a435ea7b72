/** Helpers for provisioning tests: a fake `sky` on PATH with its own state dir, and what it recorded. */
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { Client } from '@temporalio/client';
import type { NativeConnection } from '@temporalio/worker';
import type { HaruWorker } from '../../workers/worker';
import { createTestDatabase, seedLayout, type TestDatabase } from '../../db/testing';
import { createSpawnExec } from '../../drivers/exec';
import { createSkyCli, type SkyCli } from '../../drivers/sky';
import type { FleetLayout } from '../../schemas/layout';
import { connectTestServer, uniqueTaskQueue } from '../workflows/support/temporal';
import { startTestWorker } from '../workflows/support/worker';
import type { HaruWorkerOptions } from '../../workers/worker';

export const REPO_ROOT = path.resolve(__dirname, '../..');
export const SIM_BIN = path.join(REPO_ROOT, 'sim/bin');
export const CLI_BIN = path.join(REPO_ROOT, 'bin/haru.js');

/** One invocation as the fake recorded it. */
export interface FakeSkyCall {
  argv: string[];
  at: string;
  /** --secret values it received through its environment. */
  secrets?: Record<string, string>;
  /** The YAML file's text while the command ran. */
  yaml?: string;
}

/** Scripted outcome of one fake `sky` command (see sim/bin/sky). */
export interface FakeSkyOutcome {
  exitCode?: number;
  stdout?: string;
  stderr?: string;
  delayMs?: number;
  progressEveryMs?: number;
}

export interface FakeSky {
  /** A SkyCli that runs the fake through the real spawn exec, found on PATH. */
  cli: SkyCli;
  stateDir: string;
  calls(): FakeSkyCall[];
  script(outcomes: Record<string, FakeSkyOutcome | FakeSkyOutcome[]>): void;
  clusters(): Record<string, { status: string; pid: number | null }>;
  services(): Record<string, { status: string; pid: number | null }>;
  /** Output of a task's `run`. */
  log(name: string): string;
  /** Downs every cluster and service left behind, then removes the state dir. */
  cleanup(): Promise<void>;
}

const readJson = <T>(file: string, fallback: T): T => {
  try {
    return JSON.parse(readFileSync(file, 'utf8')) as T;
  } catch {
    return fallback;
  }
};

/**
 * The fake `sky` with its own state dir, run with PATH (sim/bin first: the fake `vllm` and `nvidia-smi`
 * play the host image's), a private HOME, and `env` (what the worker's environment would add).
 */
export function createFakeSky(env: Record<string, string> = {}): FakeSky {
  const root = mkdtempSync(path.join(os.tmpdir(), 'haru-fake-sky-'));
  const stateDir = path.join(root, 'state');
  const tmpDir = path.join(root, 'tmp');
  mkdirSync(stateDir);
  mkdirSync(tmpDir);
  const cli = createSkyCli({
    exec: createSpawnExec({ killGraceMs: 1_000 }),
    env: {
      PATH: `${SIM_BIN}:${process.env.PATH ?? '/usr/bin:/bin'}`,
      HOME: root,
      FAKE_SKY_STATE_DIR: stateDir,
      ...env,
    },
    tmpDir,
  });
  return {
    cli,
    stateDir,
    calls: () =>
      existsSync(path.join(stateDir, 'calls.jsonl'))
        ? readFileSync(path.join(stateDir, 'calls.jsonl'), 'utf8')
            .split('\n')
            .filter(Boolean)
            .map((line) => JSON.parse(line) as FakeSkyCall)
        : [],
    script: (outcomes) => writeFileSync(path.join(stateDir, 'script.json'), JSON.stringify(outcomes)),
    clusters: () => readJson(path.join(stateDir, 'clusters.json'), {}),
    services: () => readJson(path.join(stateDir, 'services.json'), {}),
    log: (name) => {
      try {
        return readFileSync(path.join(stateDir, `${name}.log`), 'utf8');
      } catch {
        return '';
      }
    },
    async cleanup() {
      writeFileSync(path.join(stateDir, 'script.json'), '{}');
      for (const name of Object.keys(readJson(path.join(stateDir, 'clusters.json'), {}))) {
        await cli.down(name).catch(() => undefined);
      }
      for (const name of Object.keys(readJson(path.join(stateDir, 'services.json'), {}))) {
        await cli.serveDown(name).catch(() => undefined);
      }
      rmSync(root, { recursive: true, force: true });
    },
  };
}

/** A seeded database, the fake `sky`, and a real worker with it on a fresh task queue of the test server. */
export interface ProvisioningRig {
  db: TestDatabase;
  fleetId: string;
  /** Domain ids by slug. */
  ids: Record<string, string>;
  sky: FakeSky;
  connection: NativeConnection;
  client: Client;
  taskQueue: string;
  worker: HaruWorker;
  /** Shuts the worker down, removes the fake's state, closes the connection and drops the database. */
  stop(): Promise<void>;
}

/**
 * Seeds `layout` into a fresh database and runs a worker (supervisor `token`, fast polls) with the fake `sky`
 * (`skyEnv`: added to the environment `sky` runs with, and the worker's environment for per-domain tokens);
 * `workerOptions` adds worker options (the supervisor CA and its issuer).
 */
export async function startProvisioningRig(
  layout: FleetLayout,
  name: string,
  token: string,
  skyEnv: Record<string, string> = {},
  workerOptions: Partial<HaruWorkerOptions> = {},
): Promise<ProvisioningRig> {
  const db = await createTestDatabase();
  const { fleetId } = await seedLayout(db.store, layout);
  const ids: Record<string, string> = {};
  for (const d of (await db.store.fleets.snapshot(fleetId))!.domains) ids[d.slug] = d.id;
  const sky = createFakeSky(skyEnv);
  const server = await connectTestServer();
  const taskQueue = uniqueTaskQueue(name);
  const { worker, stop } = await startTestWorker(server.connection, db.store, taskQueue, {
    supervisorToken: token,
    // A domain's `supervisor.tokenEnv` is read from the worker's environment, which holds what `sky` gets.
    env: skyEnv,
    sky: sky.cli,
    ...workerOptions,
  });
  return {
    db,
    fleetId,
    ids,
    sky,
    connection: server.connection,
    client: server.client,
    taskQueue,
    worker,
    async stop() {
      await stop();
      await sky.cleanup();
      await server.close();
      await db.drop();
    },
  };
}

export { eventually } from '../support/eventually';
