import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { Client, WorkflowHandle } from '@temporalio/client';
import { seedLayout, type TestDatabase } from '../../../db/testing';
import type { Operation } from '../../../schemas/entities';
import type { FleetPolicyInput } from '../../../schemas/policy';
import { monitorWorkflowId } from '../../../workflows/definitions';
import { type SimFleet, type SimFleetDomain, startSimFleet, TEST_POLICY } from '../../workflows/support/sim-fleet';
import { eventually, type TestClients } from '../../workflows/support/temporal';
import { startWorkerProcess, type WorkerProcess } from '../../support/worker-process';

/** A simulated fleet driven by `haru worker` child processes on one task queue. */
export interface ChaosRig {
  fleet: SimFleet;
  client: Client;
  taskQueue: string;
  temporalAddress: string;
  /** The worker processes started so far (the last one is the live one). */
  workers: WorkerProcess[];
  /**
   * Starts one more `haru worker` process on the rig's task queue (after a kill: the replacement), with `env`
   * added to the rig's `workerEnv`.
   */
  startWorker(env?: Record<string, string>): Promise<WorkerProcess>;
  /** Creates a promote operation for `target` and starts its workflow, as the API does. */
  promote(target: SimFleetDomain): Promise<{ operation: Operation; handle: WorkflowHandle }>;
  /** Polls the operation row until it has entered `step` (the store's view, written when the step starts). */
  waitForStep(operationId: string, step: string, timeoutMs?: number): Promise<Operation>;
  /** The fleet's routing pointer and revision as the store has them. */
  routing(): Promise<{ activeDomainId: string | null; routeRevision: number }>;
  close(): Promise<void>;
}

export interface ChaosRigOptions {
  /** The server's clients: operations start through its orchestrator on `taskQueue`. */
  temporal: TestClients;
  temporalAddress: string;
  taskQueue: string;
  policy?: FleetPolicyInput;
  trainerEnv?: Record<string, string>;
  wakeDelayMs?: number;
  db?: TestDatabase;
  /** More environment of every worker process. */
  workerEnv?: Record<string, string>;
  /** GPUs per domain (default 1). */
  gpus?: 1 | 2;
  /** Each fake vLLM's `--max-num-seqs` (requests beyond it wait in its engine). */
  maxNumSeqs?: number;
  /** More environment of both supervisors (a shorter HARU_VLLM_WEDGE_MS, say); a revived host has the defaults. */
  supervisorEnv?: Record<string, string>;
}

/** Starts a two-domain simulated fleet (east active, west standby); workers come from `startWorker`. */
export async function startChaosRig(opts: ChaosRigOptions): Promise<ChaosRig> {
  const logDir = mkdtempSync(path.join(os.tmpdir(), 'haru-chaos-'));
  const fleet = await startSimFleet({
    policy: { ...TEST_POLICY, autoFailover: false, ...opts.policy },
    trainerEnv: opts.trainerEnv,
    wakeDelayMs: opts.wakeDelayMs,
    db: opts.db,
    gpus: opts.gpus,
    maxNumSeqs: opts.maxNumSeqs,
    supervisorEnv: opts.supervisorEnv,
  });
  const workers: WorkerProcess[] = [];
  const store = fleet.db.store;
  const { client } = opts.temporal;
  const orchestrator = opts.temporal.orchestrator(opts.taskQueue);
  return {
    fleet,
    client,
    taskQueue: opts.taskQueue,
    temporalAddress: opts.temporalAddress,
    workers,
    async startWorker(env) {
      const worker = await startWorkerProcess({
        databaseUrl: fleet.db.url,
        temporalAddress: opts.temporalAddress,
        taskQueue: opts.taskQueue,
        logFile: path.join(logDir, `worker-${workers.length + 1}.log`),
        env: { ...opts.workerEnv, ...env },
      });
      workers.push(worker);
      return worker;
    },
    async promote(target) {
      const { outcome, operation } = await store.operations.create({
        fleetId: fleet.fleetId,
        kind: 'promote',
        targetDomainId: target.id,
        reason: 'chaos test',
        requestedBy: 'test',
      });
      if (outcome !== 'created') throw new Error(`promotion not created: ${outcome}`);
      await orchestrator.startOperation(operation);
      return { operation, handle: client.workflow.getHandle(operation.workflowId) };
    },
    waitForStep(operationId, step, timeoutMs = 120_000) {
      return eventually(
        `operation ${operationId} to enter ${step}`,
        async () => {
          const op = await store.operations.get(operationId);
          if (op && op.state !== 'pending' && op.state !== 'running') {
            throw new Error(`operation ended (${op.state}) before reaching ${step}: ${JSON.stringify(op.error)}`);
          }
          return op?.step === step ? op : null;
        },
        timeoutMs,
        25,
      );
    },
    async routing() {
      const snapshot = (await store.fleets.snapshot(fleet.fleetId))!;
      return { activeDomainId: snapshot.activeDomainId, routeRevision: snapshot.routeRevision };
    },
    async close() {
      await Promise.all(workers.map((w) => w.stop()));
      await client.workflow
        .getHandle(monitorWorkflowId(fleet.fleetId))
        .terminate('chaos test over')
        .catch(() => undefined);
      await fleet.close();
      if (process.env.HARU_CHAOS_KEEP_LOGS !== '1') rmSync(logDir, { recursive: true, force: true });
    },
  };
}

/** Re-applies the rig fleet's layout with a changed policy (workflows read it when they begin). */
export async function setPolicy(rig: ChaosRig, policy: FleetPolicyInput): Promise<void> {
  const layout = rig.fleet.layout;
  await seedLayout(rig.fleet.db.store, {
    ...layout,
    fleet: { ...layout.fleet, policy: { ...layout.fleet.policy, ...policy } },
  });
}

/** Admin calls a simulated domain's fake vLLM has received (`POST /sleep?level=1`, ...), oldest first. */
export async function vllmCalls(domain: SimFleetDomain): Promise<string[]> {
  const model = domain.sim.models[0]!;
  const res = await fetch(`http://127.0.0.1:${model.port}/_sim/state`);
  return ((await res.json()) as { calls: string[] }).calls;
}

/**
 * The reasons `domainId` was moved for, from its own `domain.state` events: a poll's words survive a later
 * poll or the promotion rewriting the row's `lastError`.
 */
export async function domainStateReasons(fleet: SimFleet, domainId: string): Promise<string[]> {
  const events = await fleet.db.store.events.list(fleet.fleetId, { limit: 1_000 });
  return events
    .filter((e) => e.domainId === domainId && e.type === 'domain.state')
    .map((e) => String((e.data as { reason?: unknown } | null)?.reason ?? ''));
}
