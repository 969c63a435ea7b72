/**
 * Chaos: the worker process is SIGKILLed while a promotion is inside each of its six steps. Each step is
 * held open by a fault on the simulated host (or a row lock in Postgres) until the worker is dead, so the
 * kill provably lands inside the step; a fresh `haru worker` process then finishes the promotion. The
 * routing pointer must move exactly once (revision +1) and the old active must be demoted exactly once.
 */
import postgres from 'postgres';
import { signalGroup } from '../../sim/processes';
import { complete, hostState } from '../workflows/support/sim-fleet';
import { eventually, uniqueTaskQueue, useTestServer } from '../workflows/support/temporal';
import { type ChaosRig, type ChaosRigOptions, startChaosRig, vllmCalls } from './support/rig';

jest.setTimeout(300_000);

const server = useTestServer();

/** Budgets wide enough that a step held by a fault outlives a worker restart on a loaded machine. */
const WIDE = {
  stopTrainingTimeoutMs: 180_000,
  verifyGpuTimeoutMs: 120_000,
  wakeTimeoutMs: 120_000,
  probeTimeoutMs: 120_000,
  // The CAS blocked on a row lock: the dead worker's attempt times out (5 s start-to-close) and is retried.
  commitTimeoutMs: 120_000,
  drainTimeoutMs: 120_000,
};

/**
 * How a step is held open: `arm` before the promotion starts (so the step cannot finish early), `release`
 * once the worker is dead (so the replacement can finish it).
 */
interface Gate {
  arm(rig: ChaosRig): Promise<void>;
  release(rig: ChaosRig): Promise<void>;
}

async function killInStep(step: string, gate: Gate, rigOptions: Partial<ChaosRigOptions> = {}): Promise<void> {
  const rig = await startChaosRig({
    temporal: server,
    temporalAddress: process.env.TEMPORAL_TEST_ADDRESS!,
    taskQueue: uniqueTaskQueue(`chaos-kill-${step}`),
    ...rigOptions,
    policy: { ...WIDE, ...rigOptions.policy },
  });
  try {
    const { fleet } = rig;
    const first = await rig.startWorker();
    const before = await rig.routing();
    expect(before.activeDomainId).toBe(fleet.east.id);
    await gate.arm(rig);

    const { operation, handle } = await rig.promote(fleet.west);
    await rig.waitForStep(operation.id, step);
    await first.kill();
    // The operation is still in flight: nothing finished the step behind the kill.
    expect((await fleet.db.store.operations.get(operation.id))?.step).toBe(step);
    await gate.release(rig);
    await rig.startWorker();

    const result = await handle.result();
    expect(result).toMatchObject({ state: 'succeeded', demotion: 'succeeded' });
    expect(await rig.routing()).toEqual({ activeDomainId: fleet.west.id, routeRevision: before.routeRevision + 1 });
    expect(await fleet.db.store.operations.get(operation.id)).toMatchObject({
      state: 'succeeded',
      routingCommitted: true,
      routeRevision: before.routeRevision + 1,
    });
    const events = await fleet.db.store.events.list(fleet.fleetId, { limit: 1_000 });
    expect(events.filter((e) => e.type === 'routing.committed')).toHaveLength(1);
    const demoted = events.filter(
      (e) => e.operationId === operation.id && e.data.step === 'demoteOldActive' && e.data.status === 'succeeded',
    );
    expect(demoted).toHaveLength(1);

    // The new active serves; the old active is on standby, put to sleep by exactly one request.
    expect(await complete(fleet.west.servingUrl)).not.toBe('');
    const east = await hostState(fleet, fleet.east);
    expect(east.models).toEqual(['asleep']);
    expect(east.training).toEqual(['running']);
    expect((await vllmCalls(fleet.east)).filter((c) => c.startsWith('POST /sleep'))).toHaveLength(1);
  } finally {
    await rig.close();
  }
}

/** The standby's trainer ignores SIGTERM and the grace is long: stopTraining waits until the trainer dies. */
const stubbornTrainer: Gate = {
  async arm() {},
  async release(rig) {
    const { training } = await rig.fleet.status(rig.fleet.west);
    for (const run of training) signalGroup(run.pids[0], 'SIGKILL'); // the run's leader leads its group
  },
};

/** The standby's nvidia-smi fails (driver error): verifyGpuReleased retries until it answers again. */
const brokenNvidiaSmi: Gate = {
  async arm(rig) {
    rig.fleet.west.sim.faults.gpu({ fault: 'fail' });
  },
  async release(rig) {
    rig.fleet.west.sim.faults.gpu({ fault: null });
  },
};

/** The standby's vLLM answers /wake_up with 200 and stays asleep: wakeModels keeps asking. */
const wakeThatDoesNothing: Gate = {
  async arm(rig) {
    await rig.fleet.west.sim.faults.set(rig.fleet.west.sim.models[0]!.name, { wakeNoop: true });
  },
  async release(rig) {
    await rig.fleet.west.sim.faults.clear();
  },
};

/** The standby's vLLM accepts inference and never answers: the probe hangs. */
const hangingProbe: Gate = {
  async arm(rig) {
    await rig.fleet.west.sim.faults.set(rig.fleet.west.sim.models[0]!.name, { hang: true });
  },
  async release(rig) {
    await rig.fleet.west.sim.faults.clear();
  },
};

/**
 * Another session holds the fleet row (`FOR NO KEY UPDATE`: it blocks the commit's UPDATE but not the
 * foreign-key checks of new operation and event rows): the commit's UPDATE waits for it.
 */
function lockedFleetRow(): Gate {
  let sql: postgres.Sql | undefined;
  let unlock: (() => void) | undefined;
  let done: Promise<unknown> | undefined;
  return {
    async arm(rig) {
      sql = postgres(rig.fleet.db.url, { max: 1, onnotice: () => {} });
      let locked!: () => void;
      const isLocked = new Promise<void>((resolve) => (locked = resolve));
      done = sql.begin(async (tx) => {
        await tx`select id from fleets where id = ${rig.fleet.fleetId} for no key update`;
        locked();
        await new Promise<void>((resolve) => (unlock = resolve));
      });
      await isLocked;
    },
    async release() {
      unlock?.();
      await done;
      await sql?.end({ timeout: 5 });
    },
  };
}

/** The old active has a request in flight that never ends: the demotion's drain waits for it. */
function stuckRequestOnOldActive(): Gate {
  const abort = new AbortController();
  let request: Promise<unknown> | undefined;
  return {
    async arm(rig) {
      const { east } = rig.fleet;
      await east.sim.faults.set(east.sim.models[0]!.name, { hang: true });
      request = fetch(`${east.servingUrl}/chat/completions`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ model: east.sim.models[0]!.name, messages: [{ role: 'user', content: 'hi' }] }),
        signal: abort.signal,
      }).catch(() => undefined);
      await eventually('the stuck request to count as running', async () => {
        const status = await rig.fleet.status(east);
        return status.models[0]?.runningRequests === 1;
      });
    },
    async release(rig) {
      abort.abort();
      await request;
      await rig.fleet.east.sim.faults.clear();
    },
  };
}

describe('the worker is SIGKILLed inside a promotion step; a new worker finishes it', () => {
  it('1. stopTraining', () =>
    killInStep('stopTraining', stubbornTrainer, {
      trainerEnv: { HARU_SIM_TRAINER_IGNORE_SIGTERM: '1' },
      policy: { trainingStopGraceMs: 150_000 },
    }));
  it('2. verifyGpuReleased', () => killInStep('verifyGpuReleased', brokenNvidiaSmi));
  it('3. wakeModels', () => killInStep('wakeModels', wakeThatDoesNothing));
  it('4. probeModels', () => killInStep('probeModels', hangingProbe));
  it('5. commitRouting', () => killInStep('commitRouting', lockedFleetRow()));
  it('6. demoteOldActive', () => killInStep('demoteOldActive', stuckRequestOnOldActive()));
});
