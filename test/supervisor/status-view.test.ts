/**
 * The status view against fake vLLM servers (sim/vllm): one in this process for slow and refused answers,
 * one in its own process for a real SIGSTOP.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { silentLogger } from '../../lib/logger';
import { modelStatusSchema, type SupervisorConfig } from '../../schemas/supervisor';
import { hasExited, spawnLogged, tsEntry, type SimChild } from '../../sim/processes';
import { createFakeVllm, type FakeVllm } from '../../sim/vllm/server';
import { eventually } from '../support/eventually';
import { freePort } from '../support/ports';
import { createListenerTable } from '../../supervisor/listeners';
import { createObservedInference } from '../../supervisor/status-view';
import { createVllmClient } from '../../supervisor/vllm';

let fake: FakeVllm;
let child: SimChild | null = null;
let dir: string;

beforeAll(async () => {
  dir = mkdtempSync(path.join(os.tmpdir(), 'haru-status-view-'));
  fake = createFakeVllm({ model: 'm', port: 0, gpuIndex: 0, tokensPerSecond: 5_000, onCrash: () => {} });
  await fake.listen();
});
afterEach(async () => {
  await fake.setFaults(null);
  if (child && !hasExited(child)) {
    process.kill(child.process.pid!, 'SIGCONT');
    process.kill(child.process.pid!, 'SIGKILL');
    await child.exited;
  }
  child = null;
});
afterAll(async () => {
  await fake.close();
  rmSync(dir, { recursive: true, force: true });
});

function viewOf(port: number, slowMs = 300) {
  const config: SupervisorConfig = {
    inference: [{ gpuIndex: 0, sleepLevel: 1, models: [{ name: 'm', port }] }],
    training: [],
  };
  return createObservedInference({
    config,
    vllm: createVllmClient({ timeoutMs: 10_000, wakeTimeoutMs: 10_000 }),
    logger: silentLogger,
    listeners: createListenerTable(),
    now: () => new Date(),
    slowMs,
  });
}

describe('supervisor status view', () => {
  it('reads a quick server as ready and awake, with ages, pids and request counts', async () => {
    const { statusView } = viewOf(fake.port!);
    const [model] = await statusView.snapshot(5_000);
    expect(modelStatusSchema.parse(model)).toMatchObject({
      state: 'awake',
      condition: 'ready',
      runningRequests: 0,
      waitingRequests: 0,
      stateAgeMs: expect.any(Number),
      processes: { pids: expect.arrayContaining([process.pid]), stoppedPids: [], healthOk: true },
    });
  });

  it('answers before a slow server does: the model is busy with its last confirmed state, never gone', async () => {
    const { statusView } = viewOf(fake.port!);
    await statusView.snapshot(5_000);
    await fake.setFaults({ adminLagMs: 3_000 });
    const started = Date.now();
    const busy = await eventually('the model busy', async () => {
      const [model] = await statusView.snapshot(50);
      return model!.condition === 'busy' && model;
    });
    expect(Date.now() - started).toBeLessThan(3_000); // the slow answers have not come back yet
    expect(busy).toMatchObject({
      state: 'awake',
      error: expect.stringMatching(/unanswered for \d+ ms/),
      processes: { pids: expect.arrayContaining([process.pid]) },
    });
    expect(busy.stateAgeMs).toBeGreaterThanOrEqual(300);
    await fake.setFaults(null);
    await eventually('ready again', async () => (await statusView.snapshot(50))[0]!.condition === 'ready');
  });

  it('keeps the state a sleep proved, without waiting for the next read', async () => {
    const { inference, statusView } = viewOf(fake.port!);
    await statusView.snapshot(5_000);
    await fake.setFaults({ adminLagMs: 200 });
    expect(await inference.sleep({})).toMatchObject({ accepted: true });
    await fake.setFaults({ adminLagMs: 5_000 });
    expect((await statusView.snapshot(0))[0]!.state).toBe('asleep');
    await fake.setFaults(null);
    await inference.wake({});
  });

  it('reads a refused port with no process as gone, state unknown', async () => {
    const { statusView } = viewOf(fake.port!);
    await fake.setFaults({ refuse: true });
    const gone = await eventually('the model gone', async () => {
      const [model] = await statusView.snapshot(1_000);
      return model!.condition === 'gone' && model;
    });
    expect(gone).toMatchObject({ state: 'unknown', runningRequests: null, processes: { pids: [] } });
  });

  it('reads a server whose processes are all stopped (SIGSTOP) as frozen, and ready after SIGCONT', async () => {
    const port = await freePort();
    const [node, entry] = tsEntry('sim/vllm/main.ts');
    const args = [...entry, '--model', 'm', '--port', String(port)];
    child = spawnLogged('vllm', [node, args], process.env, path.join(dir, 'vllm.log'));
    const { statusView } = viewOf(port);
    await eventually(
      'the server ready',
      async () => (await statusView.snapshot(1_000))[0]!.condition === 'ready',
      45_000,
    );
    process.kill(child.process.pid!, 'SIGSTOP');
    const frozen = await eventually('the model frozen', async () => {
      const [model] = await statusView.snapshot(100);
      return model!.condition === 'frozen' && model;
    });
    expect(frozen.processes!.stoppedPids).toContain(child.process.pid);
    process.kill(child.process.pid!, 'SIGCONT');
    await eventually('ready after SIGCONT', async () => (await statusView.snapshot(1_000))[0]!.condition === 'ready');
  });
});
