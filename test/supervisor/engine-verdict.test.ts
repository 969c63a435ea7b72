/**
 * The status view judging inference, not only admin, against a fake vLLM in its own process: a hung engine
 * (requests accepted, never answered; `/health` and `/metrics` fine) is `wedged` with traffic (its generation
 * counter stands still under running requests) and without (its synthetic completion goes unanswered), an
 * engine answering 5xx is `erroring`, and a slow engine whose tokens still flow stays `ready`.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { silentLogger } from '../../lib/logger';
import type { ModelStatus, SupervisorConfig } from '../../schemas/supervisor';
import { hasExited, spawnLogged, tsEntry, type SimChild } from '../../sim/processes';
import { type VllmControlInput, writeControlFile } from '../../sim/vllm/control';
import { eventually } from '../support/eventually';
import { freePort } from '../support/ports';
import { createListenerTable } from '../../supervisor/listeners';
import { createObservedInference, type StatusView } from '../../supervisor/status-view';
import { createVllmClient } from '../../supervisor/vllm';

/** Shortened for the test: a probe each second on an idle engine, answered within a second. */
const WEDGE_MS = 2_000;

let dir: string;
let child: SimChild;
let port: number;
let controlFile: string;
let statusView: StatusView;
/** Client requests still open, aborted after each test. */
const clients: AbortController[] = [];

beforeAll(async () => {
  dir = mkdtempSync(path.join(os.tmpdir(), 'haru-engine-verdict-'));
  port = await freePort();
  controlFile = path.join(dir, 'm.control.json');
  const [node, entry] = tsEntry('sim/vllm/main.ts');
  const args = [...entry, '--model', 'm', '--port', String(port), '--control', controlFile, '--max-num-seqs', '2'];
  child = spawnLogged('vllm', [node, args], process.env, path.join(dir, 'vllm.log'));
  const config: SupervisorConfig = {
    inference: [{ gpuIndex: 0, sleepLevel: 1, models: [{ name: 'm', port }] }],
    training: [],
  };
  ({ statusView } = createObservedInference({
    config,
    vllm: createVllmClient({ timeoutMs: 5_000, wakeTimeoutMs: 10_000 }),
    logger: silentLogger,
    listeners: createListenerTable(),
    now: () => new Date(),
    slowMs: 1_000,
    wedgeMs: WEDGE_MS,
  }));
  statusView.start(200);
  await eventually('the fake vLLM ready', async () => (await model()).condition === 'ready', 45_000);
}, 60_000);

afterEach(async () => {
  for (const client of clients.splice(0)) client.abort();
  await setFaults({});
  await eventually('ready again', async () => (await model()).condition === 'ready', 15_000);
});

afterAll(async () => {
  statusView?.stop();
  if (child && !hasExited(child)) {
    child.process.kill('SIGKILL');
    await child.exited;
  }
  rmSync(dir, { recursive: true, force: true });
});

const model = async (): Promise<ModelStatus> => (await statusView.snapshot(100))[0]!;

/** Writes the control file and waits until the fake applies it. */
async function setFaults(control: VllmControlInput) {
  writeControlFile(controlFile, control);
  const expected = JSON.stringify({ hang: false, error: false, ...control });
  await eventually('the faults applied', async () => {
    const res = await fetch(`http://127.0.0.1:${port}/_sim/state`);
    const { faults } = (await res.json()) as { faults: Record<string, unknown> };
    const applied = Object.fromEntries(Object.keys(JSON.parse(expected) as object).map((k) => [k, faults[k]]));
    return JSON.stringify(applied) === expected;
  });
}

/** One client request, left open until it is answered or the test ends. */
function send(maxTokens = 8) {
  const abort = new AbortController();
  clients.push(abort);
  return fetch(`http://127.0.0.1:${port}/v1/chat/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ model: 'm', messages: [{ role: 'user', content: 'hi' }], max_tokens: maxTokens }),
    signal: abort.signal,
  })
    .then((res) => res.text())
    .catch(() => undefined);
}

/** A client sending one request every `everyMs` until the test ends. */
function steadyTraffic(everyMs: number, maxTokens?: number) {
  const timer = setInterval(() => void send(maxTokens), everyMs);
  const abort = new AbortController();
  abort.signal.addEventListener('abort', () => clearInterval(timer));
  clients.push(abort);
}

describe('the status view judging inference', () => {
  it('reads a hung engine under traffic as wedged: requests running, the generation counter standing still', async () => {
    await setFaults({ hang: true });
    steadyTraffic(500);
    const started = Date.now();
    const wedged = await eventually('the model wedged', async () => {
      const m = await model();
      return m.condition === 'wedged' && m;
    });
    expect(Date.now() - started).toBeGreaterThanOrEqual(WEDGE_MS);
    expect(wedged.runningRequests).toBeGreaterThan(0);
    expect(wedged.error).toMatch(
      /^engine wedged: \d+ running, \d+ waiting, vllm:generation_tokens_total \d+, unchanged/,
    );
    expect(wedged.processes).toMatchObject({ healthOk: true }); // /health says nothing of it
  });

  it('reads a hung engine without traffic as wedged by its unanswered synthetic completion', async () => {
    await setFaults({ hang: true });
    const wedged = await eventually('the model wedged', async () => {
      const m = await model();
      return m.condition === 'wedged' && m;
    });
    expect(wedged.error).toMatch(/^engine wedged: a synthetic completion \(max_tokens 1\) unanswered for/);
  });

  it('reads an engine answering every completion with 5xx as erroring', async () => {
    await setFaults({ error: true });
    const erroring = await eventually('the model erroring', async () => {
      const m = await model();
      return m.condition === 'erroring' && m;
    });
    expect(erroring.error).toMatch(/^engine erroring: a synthetic completion answered HTTP 500: EngineCore/);
  });

  it('keeps a slow engine whose tokens still flow ready, with requests waiting, for several windows', async () => {
    // Two tokens a second, two running and more waiting: each request takes 8 s, longer than the window.
    await setFaults({ tokensPerSecond: 2 });
    steadyTraffic(1_000, 16);
    await eventually('requests waiting', async () => ((await model()).waitingRequests ?? 0) > 0);
    const until = Date.now() + 3 * WEDGE_MS;
    while (Date.now() < until) {
      const m = await model();
      expect({ condition: m.condition, error: m.error }).toEqual({ condition: 'ready', error: null });
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
  }, 30_000);
});
