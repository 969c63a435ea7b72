import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { createTestDatabase, seedLayout, type TestDatabase } from '../../../db/testing';
import { fleetLayoutSchema, type FleetLayout } from '../../../schemas/layout';
import type { FleetPolicyInput } from '../../../schemas/policy';
import type { SupervisorStatus } from '../../../schemas/supervisor';
import { SIM_TRAINER, startSimDomain, type SimDomain } from '../../../sim/domain';
import { freePort } from '../../support/ports';
import type { Operation } from '../../../schemas/entities';
import type { useTestServer } from './temporal';

/** Budgets that fail a broken step in seconds but leave a loaded 2-core machine room to do real work. */
export const TEST_POLICY: FleetPolicyInput = {
  heartbeatIntervalMs: 200,
  heartbeatStaleMs: 3_000,
  failureThreshold: 3,
  degradedGraceMs: 30_000,
  trainingStopGraceMs: 2_000,
  stopTrainingTimeoutMs: 20_000,
  verifyGpuTimeoutMs: 20_000,
  wakeTimeoutMs: 20_000,
  probeTimeoutMs: 15_000,
  commitTimeoutMs: 10_000,
  drainTimeoutMs: 2_000,
  sleepTimeoutMs: 20_000,
  startTrainingTimeoutMs: 20_000,
};

export const MODEL = 'llama-1b';
/** The model of each GPU of a two-GPU fleet (GPU 0 runs MODEL). */
export const MODELS = [MODEL, 'qwen-1b'] as const;

export interface SimFleetDomain {
  id: string;
  slug: 'east' | 'west';
  sim: SimDomain;
  supervisorUrl: string;
  servingUrl: string;
}

/** A fleet of two simulated domains (east active, west standby) seeded into a throwaway database. */
export interface SimFleet {
  fleetId: string;
  layout: FleetLayout;
  db: TestDatabase;
  east: SimFleetDomain;
  west: SimFleetDomain;
  domain(id: string): SimFleetDomain;
  /** The supervisor's status of a domain (GET /v1/status, no token). */
  status(domain: SimFleetDomain): Promise<SupervisorStatus>;
  /** Stops both domains and drops the database. */
  close(): Promise<void>;
}

export interface SimFleetOptions {
  policy?: FleetPolicyInput;
  /** Environment of every trainer (e.g. `HARU_SIM_TRAINER_IGNORE_SIGTERM`). */
  trainerEnv?: Record<string, string>;
  wakeDelayMs?: number;
  /** An existing database to seed into (shared by the tests of a file). */
  db?: TestDatabase;
  /**
   * Run every fake vLLM with `--api-key` this key (the supervisors are configured with it); the layout's
   * bindings name it as `upstreamAuth` in SIM_UPSTREAM_KEY_ENV, set in this process for the worker's probe.
   */
  vllmApiKey?: string;
  /** GPUs per domain, each with one model and one trainer (default 1). */
  gpus?: 1 | 2;
  /** Each fake vLLM's `--max-num-seqs` (requests beyond it wait in its engine). */
  maxNumSeqs?: number;
  /** More environment of both supervisors (a shorter HARU_VLLM_WEDGE_MS, say). */
  supervisorEnv?: Record<string, string>;
}

let fleetCounter = 0;
/** The variable the layout's `upstreamAuth` names when the fake vLLMs run with `--api-key`. */
export const SIM_UPSTREAM_KEY_ENV = 'HARU_SECRET_UPSTREAM_KEY';

/** Starts the fleet: ports are free ones, the layout is seeded, east serves and west sleeps with training running. */
export async function startSimFleet(opts: SimFleetOptions = {}): Promise<SimFleet> {
  const stateRoot = mkdtempSync(path.join(os.tmpdir(), 'haru-simfleet-'));
  const gpus = opts.gpus === 2 ? [0, 1] : [0];
  // Per domain: the supervisor's port, then one serving port per GPU.
  const ports = { east: [await freePort()], west: [await freePort()] };
  for (const d of ['east', 'west'] as const) for (let i = 0; i < gpus.length; i++) ports[d].push(await freePort());
  // Unique on the shared dev server: jest gives each test file a fresh module (the counter starts again) in a
  // worker process that may have run another file, and search attributes find fleets by slug.
  const slug = `sim-${randomBytes(4).toString('hex')}-${++fleetCounter}`;
  const layout = fleetLayoutSchema.parse({
    fleet: { slug, activeDomain: 'east', policy: { ...TEST_POLICY, ...opts.policy } },
    domains: (['east', 'west'] as const).map((d) => ({
      slug: d,
      supervisorUrl: `http://127.0.0.1:${ports[d][0]}`,
      slots: gpus.flatMap((gpuIndex) => [
        {
          kind: 'inference',
          gpuIndex,
          models: [
            {
              name: MODELS[gpuIndex],
              servingUrl: `http://127.0.0.1:${ports[d][1 + gpuIndex]}/v1`,
              ...(opts.vllmApiKey ? { upstreamAuth: { env: SIM_UPSTREAM_KEY_ENV } } : {}),
            },
          ],
        },
        {
          kind: 'training',
          gpuIndex,
          command: ['node', SIM_TRAINER],
          checkpointDir: `checkpoints/gpu${gpuIndex}`,
          ...(opts.trainerEnv ? { env: opts.trainerEnv } : {}),
        },
      ]),
    })),
  });
  if (opts.vllmApiKey) process.env[SIM_UPSTREAM_KEY_ENV] = opts.vllmApiKey;
  const db = opts.db ?? (await createTestDatabase());
  const report = await seedLayout(db.store, layout);
  const snapshot = (await db.store.fleets.snapshot(report.fleetId))!;
  const started: SimDomain[] = [];
  const startDomain = async (slugName: 'east' | 'west'): Promise<SimFleetDomain> => {
    const sim = await startSimDomain({
      layout,
      domainSlug: slugName,
      stateDir: path.join(stateRoot, slugName),
      role: slugName === 'east' ? 'active' : 'standby',
      wakeDelayMs: opts.wakeDelayMs,
      shutdownGraceMs: 2_000,
      vllmApiKey: opts.vllmApiKey,
      maxNumSeqs: opts.maxNumSeqs,
      supervisorEnv: opts.supervisorEnv,
    });
    started.push(sim);
    return {
      id: snapshot.domains.find((d) => d.slug === slugName)!.id,
      slug: slugName,
      sim,
      supervisorUrl: sim.supervisorUrl,
      servingUrl: `http://127.0.0.1:${ports[slugName][1]}/v1`,
    };
  };
  try {
    const [east, west] = await Promise.all([startDomain('east'), startDomain('west')]);
    return {
      fleetId: report.fleetId,
      layout,
      db,
      east,
      west,
      domain: (id) => (id === east.id ? east : west),
      async status(domain) {
        const res = await fetch(`${domain.supervisorUrl}/v1/status`);
        return (await res.json()) as SupervisorStatus;
      },
      async close() {
        await Promise.all(started.map((s) => s.kill()));
        if (!opts.db) await db.drop();
        rmSync(stateRoot, { recursive: true, force: true });
      },
    };
  } catch (err) {
    await Promise.all(started.map((s) => s.kill()));
    if (!opts.db) await db.drop();
    throw err;
  }
}

/** The fleet's routing pointer: its active domain and revision. */
export async function routingOf(fleet: SimFleet) {
  const s = (await fleet.db.store.fleets.snapshot(fleet.fleetId))!;
  return { activeDomainId: s.activeDomainId, routeRevision: s.routeRevision };
}

/** Creates a promotion of `target`, runs it on `taskQueue` and waits for its end; resolves with the operation row. */
export async function promoteAndWait(
  server: ReturnType<typeof useTestServer>,
  taskQueue: string,
  fleet: SimFleet,
  target: SimFleetDomain,
): Promise<Operation> {
  const store = fleet.db.store;
  const { operation } = await store.operations.create({
    fleetId: fleet.fleetId,
    kind: 'promote',
    targetDomainId: target.id,
    reason: 'test',
    requestedBy: 'test',
  });
  await server.orchestrator(taskQueue).startOperation(operation);
  await server.client.workflow
    .getHandle(operation.workflowId)
    .result()
    .catch(() => null);
  return (await store.operations.get(operation.id))!;
}

/** True when every model of the domain is `state` and its training is running (`true`) or not. */
export async function hostState(fleet: SimFleet, domain: SimFleetDomain) {
  const status = await fleet.status(domain);
  return {
    models: status.models.map((m) => m.state),
    training: status.training.map((t) => t.state),
    trainerPids: status.training.flatMap((t) => t.pids),
  };
}

/** One chat completion straight to a model's serving URL; resolves with the answer text. */
export async function complete(servingUrl: string): Promise<string> {
  const res = await fetch(`${servingUrl}/chat/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ model: MODEL, messages: [{ role: 'user', content: 'hi' }], max_tokens: 4 }),
  });
  if (!res.ok) throw new Error(`completion failed: HTTP ${res.status} ${await res.text()}`);
  const body = (await res.json()) as { choices: { message: { content: string } }[] };
  return body.choices[0]!.message.content;
}
