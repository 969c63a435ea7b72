/**
 * Chaos: the active is busy, not dead. More clients than its engine's `--max-num-seqs` keep it saturated
 * through the proxy, so requests wait in its engine (`vllm:num_requests_waiting` > 0) the whole time, while
 * tokens still flow (`vllm:generation_tokens_total` grows). The supervisor calls an engine `wedged` only when
 * requests sit in it while its progress metrics stand still for the wedge window (docs/architecture.md §9.2),
 * so a saturated engine must never be: with the window shortened to 3 s, saturation held for four windows
 * fails no poll on the engine, marks nothing failed and starts no promotion. Then the fleet fails over again.
 */
import { parsePrometheusText, sumSamples } from '../../supervisor/prometheus-text';
import { monitorWorkflowId } from '../../workflows/definitions';
import { workerCounter } from '../support/worker-process';
import { MODEL } from '../workflows/support/sim-fleet';
import { eventually, uniqueTaskQueue, useTestServer } from '../workflows/support/temporal';
import { type ChaosApi, type ClientAnswer, startChaosApi } from './support/api';
import { activeOf, killAndFailOver, untilViableStandby } from './support/failover-again';
import { type ChaosRig, domainStateReasons, startChaosRig } from './support/rig';

jest.setTimeout(420_000);

const WEDGE_MS = 3_000;
const MAX_NUM_SEQS = 2;
const CLIENTS = 8;

let rig: ChaosRig | undefined;
let api: ChaosApi | undefined;
const cleanups: (() => Promise<void>)[] = [];
const server = useTestServer(async () => {
  for (const fn of cleanups) await fn().catch(() => undefined);
  await api?.close();
  await rig?.close();
});

/** `clients` clients each sending a chat completion through the proxy as soon as its last one was answered. */
function saturate(apiUrl: string, fleet: string, clients: number): { answers: ClientAnswer[]; stop(): Promise<void> } {
  const answers: ClientAnswer[] = [];
  const abort = new AbortController();
  const loops = Array.from({ length: clients }, async () => {
    while (!abort.signal.aborted) {
      try {
        const res = await fetch(`${apiUrl}/v1/chat/completions`, {
          method: 'POST',
          headers: { 'content-type': 'application/json', 'x-haru-fleet': fleet },
          body: JSON.stringify({ model: MODEL, messages: [{ role: 'user', content: 'hi' }], max_tokens: 16 }),
          signal: abort.signal,
        });
        await res.text();
        answers.push({ at: Date.now(), status: res.status, domain: res.headers.get('x-haru-domain') });
      } catch {
        if (!abort.signal.aborted) answers.push({ at: Date.now(), status: null, domain: null });
      }
    }
  });
  return {
    answers,
    async stop() {
      abort.abort();
      await Promise.all(loops);
    },
  };
}

interface Sample {
  at: number;
  /** The fake vLLM's own figures. */
  waiting: number;
  running: number;
  generated: number;
  /** What east's supervisor reports of the model. */
  condition: string | undefined;
  supervisorWaiting: number | null | undefined;
}

it('never fails a saturated active whose requests wait while its tokens flow, and fails over a kill', async () => {
  // The default poll policy: a poll every 500 ms, 3 failed polls, stale after 5 s.
  const policy = { autoFailover: true, heartbeatIntervalMs: 500, heartbeatStaleMs: 5_000, failureThreshold: 3 };
  const taskQueue = uniqueTaskQueue('chaos-saturated');
  rig = await startChaosRig({
    temporal: server,
    temporalAddress: process.env.TEMPORAL_TEST_ADDRESS!,
    taskQueue,
    policy,
    maxNumSeqs: MAX_NUM_SEQS,
    supervisorEnv: { HARU_VLLM_WEDGE_MS: String(WEDGE_MS) },
  });
  const { fleet } = rig;
  const store = fleet.db.store;
  api = await startChaosApi({ databaseUrl: fleet.db.url, temporalAddress: rig.temporalAddress, taskQueue });
  const worker = await rig.startWorker();
  const monitor = server.client.workflow.getHandle(monitorWorkflowId(fleet.fleetId));
  await untilViableStandby(monitor, fleet.west);
  const eastRow = async () => (await store.domains.listByFleet(fleet.fleetId)).find((d) => d.id === fleet.east.id)!;
  await eventually('east ready', async () => (await eastRow()).state === 'ready', 30_000, 50);

  // Slow tokens (20 a second per request: a 16-token answer takes 0.8 s), two sequences at once, eight clients:
  // about six requests wait in the engine at any moment, and 40 tokens a second flow.
  await fleet.east.sim.faults.set(MODEL, { tokensPerSecond: 20 });
  const eventsBefore = Math.max(0, ...(await store.events.list(fleet.fleetId, { limit: 1_000 })).map((e) => e.id));
  const failedBefore = await workerCounter(worker, 'haru_worker_domain_polls_total', {
    domain: 'east',
    outcome: 'error',
  });
  const load = saturate(api.url, fleet.layout.fleet.slug, CLIENTS);
  cleanups.push(() => load.stop());
  const loadAt = Date.now();

  const vllmMetrics = `http://127.0.0.1:${fleet.east.sim.models[0]!.port}/metrics`;
  const sample = async (): Promise<Sample> => {
    const samples = parsePrometheusText(await (await fetch(vllmMetrics)).text());
    const model = (await fleet.status(fleet.east)).models.find((m) => m.name === MODEL);
    return {
      at: Date.now(),
      waiting: sumSamples(samples, 'vllm:num_requests_waiting') ?? 0,
      running: sumSamples(samples, 'vllm:num_requests_running') ?? 0,
      generated: sumSamples(samples, 'vllm:generation_tokens_total') ?? 0,
      condition: model?.condition,
      supervisorWaiting: model?.waitingRequests,
    };
  };
  // Every sample of the saturated run: requests waiting in each; the run counts from its first sample.
  let run: Sample[] = [];
  const all: Sample[] = [];
  await eventually(
    `requests waiting in east's engine for ${(4 * WEDGE_MS) / 1_000} s without a break`,
    async () => {
      const s = await sample();
      all.push(s);
      run = s.waiting > 0 ? [...run, s] : [];
      return run.length > 1 && run.at(-1)!.at - run[0]!.at >= 4 * WEDGE_MS;
    },
    120_000,
    250,
  );
  const saturatedMs = run.at(-1)!.at - run[0]!.at;
  await load.stop();

  // Tokens flowed all along: the counter grew over every half window of the run.
  const stalls = run.filter((s, i) => {
    const earlier = run.slice(0, i).findLast((e) => s.at - e.at >= WEDGE_MS / 2);
    return earlier !== undefined && s.generated <= earlier.generated;
  });
  expect(stalls).toEqual([]);
  // The supervisor saw the queue and never called the engine stuck.
  expect(run.some((s) => (s.supervisorWaiting ?? 0) > 0)).toBe(true);
  expect(all.filter((s) => s.condition === 'wedged' || s.condition === 'erroring')).toEqual([]);

  // Not failed, not failed over.
  expect(await activeOf(fleet)).toBe(fleet.east.id);
  expect(await store.operations.list(fleet.fleetId)).toEqual([]);
  expect((await eastRow()).state).toBe('ready');
  const moves = (await store.events.list(fleet.fleetId, { limit: 1_000 })).filter(
    (e) => e.type === 'domain.state' && e.domainId === fleet.east.id && e.id > eventsBefore,
  );
  expect(moves.map((e) => e.message)).toEqual([]);
  expect((await domainStateReasons(fleet, fleet.east.id)).filter((r) => /engine/.test(r))).toEqual([]);
  // Every client was answered, by east.
  expect(load.answers.length).toBeGreaterThan(0);
  expect(load.answers.filter((a) => a.status !== 200 || a.domain !== 'east')).toEqual([]);
  const failedPolls =
    (await workerCounter(worker, 'haru_worker_domain_polls_total', { domain: 'east', outcome: 'error' })) -
    failedBefore;
  const seconds = (load.answers.at(-1)!.at - loadAt) / 1_000;
  console.log(
    `saturated active: requests waiting for ${saturatedMs} ms without a break (wedge window ${WEDGE_MS} ms; ` +
      `waiting ${Math.min(...run.map((s) => s.waiting))}-${Math.max(...run.map((s) => s.waiting))}, running ` +
      `${Math.max(...run.map((s) => s.running))}, ${run.at(-1)!.generated - run[0]!.generated} tokens generated ` +
      `meanwhile); ${load.answers.length} answers by east in ${seconds.toFixed(1)} s; supervisor conditions ` +
      `${[...new Set(all.map((s) => s.condition))].join(', ')}; ${failedPolls} failed polls; no promotion`,
  );

  // A real death is still failed over.
  await untilViableStandby(monitor, fleet.west);
  await killAndFailOver(fleet, fleet.east, fleet.west);
});
