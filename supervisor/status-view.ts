import type { ModelCondition, ModelStatus } from '../schemas/supervisor';
import type { Logger } from '../lib/logger';
import type { SupervisorConfig } from '../schemas/supervisor';
import {
  DEFAULT_WEDGE_MS,
  type EngineRecord,
  type EngineVerdict,
  isProbeDue,
  judgeEngine,
  newEngineRecord,
  observeReading,
  type ProbeOutcome,
  probeEnded,
  probeStarted,
  readingOf,
} from './engine-progress';
import { type ConfiguredModel, createInferenceController } from './inference';
import type { ListenerTable } from './listeners';
import { describeVllmStatus } from '../schemas/probe-answer';
import { VllmError, type VllmClient, type VllmErrorKind } from './vllm';

/**
 * A vLLM read unanswered this long makes its model `busy`: a healthy loopback read takes milliseconds, so a
 * second means the engine's event loop is behind (a long prefill, a burst), which the monitor tells from dead.
 */
export const SLOW_READ_MS = 1_000;

/**
 * How often the view re-reads every vLLM server in the background: the monitor's own polls (every 500 ms by
 * default) keep it fresher still, so this only matters for a host nobody is asking.
 */
export const STATUS_REFRESH_MS = 1_000;

/**
 * The most a /v1/status request waits for the refresh it starts before answering from the view as it is: the
 * monitor polls every 500 ms and must get an answer in time even from a host whose vLLM reads are slow.
 */
export const STATUS_FRESH_WAIT_MS = 200;

/** The last answer of one endpoint and when it came. */
interface Reading<T> {
  value: T;
  atMs: number;
}

/** The latest outcome of one model's HTTP reads, success or failure, for telling refused from slow. */
interface Outcome {
  ok: boolean;
  kind: VllmErrorKind | null;
  message: string | null;
  atMs: number;
}

type Endpoint = 'sleeping' | 'metrics' | 'health';

interface ModelView {
  sleeping: Reading<boolean> | null;
  requests: Reading<{ running: number; waiting: number }> | null;
  health: Reading<boolean> | null;
  pids: Reading<number[] | null> | null;
  stoppedPids: number[];
  /** Per endpoint: when the call now in flight started. */
  inFlightSinceMs: Partial<Record<Endpoint, number>>;
  /** Per endpoint: the latest outcome. */
  outcomes: Partial<Record<Endpoint, Outcome>>;
  /** Whether the engine serves inference: its progress metrics and synthetic completions (engine-progress.ts). */
  engine: EngineRecord;
  /** Bumped by every sleep or wake on the model's GPU: a synthetic completion that spans one proves nothing. */
  epoch: number;
  /** The engine verdict last reported, for logging its changes. */
  reported: EngineVerdict['condition'] | null;
}

export interface StatusViewDeps {
  models: ConfiguredModel[];
  vllm: VllmClient;
  listeners: ListenerTable;
  now: () => Date;
  /** A read unanswered for this long (or one that timed out) makes its model `busy` (default SLOW_READ_MS). */
  slowMs?: number;
  /**
   * A model's HTTP reads start at most this often (default 0: at every refresh, what a real host does, so its
   * status is as fresh as the monitor asks). The benchmarks' simulated hosts, hundreds in one process, set it
   * to spare themselves three fake-vLLM requests per status read (bench/support/sim-host.ts).
   */
  minReadIntervalMs?: number;
  /**
   * Requests in an awake engine without progress for this long make its model `wedged`; an idle engine gets a
   * synthetic completion every half of it (HARU_VLLM_WEDGE_MS; default DEFAULT_WEDGE_MS).
   */
  wedgeMs?: number;
  /** Where changes of a model's engine verdict are logged. */
  logger?: Logger;
}

/** The synthetic completion's prompt: one token to generate, next to nothing to prefill. */
const PROBE_PROMPT = 'ping';

const errorOf = (err: unknown): Pick<Outcome, 'kind' | 'message'> =>
  err instanceof VllmError
    ? { kind: err.kind, message: err.message }
    : { kind: 'answer', message: err instanceof Error ? err.message : String(err) };

/**
 * The supervisor's view of its vLLM servers, read in the background so that `/v1/status` never waits on
 * vLLM: real vLLM serves `/is_sleeping`, `/metrics` and `/health` on its API server's event loop, behind
 * engine-core utility calls (vllm/entrypoints/openai/api_server.py, vllm/v1/engine/async_llm.py), and they
 * take seconds under load or during a sleep/wake. Each endpoint has at most one call in flight; a slow one
 * is not abandoned (its answer still lands) but marks the model `busy`. Host-alive evidence (the pids
 * serving the port, stopped or not; `/health`) is kept apart from model state (sleep state, requests).
 */
export function createStatusView(deps: StatusViewDeps) {
  const slowMs = deps.slowMs ?? SLOW_READ_MS;
  const { vllm, listeners } = deps;
  const nowMs = () => deps.now().getTime();
  const views = new Map<string, ModelView>(
    deps.models.map((m) => [
      m.name,
      {
        sleeping: null,
        requests: null,
        health: null,
        pids: null,
        stoppedPids: [],
        inFlightSinceMs: {},
        outcomes: {},
        engine: newEngineRecord(),
        epoch: 0,
        reported: null,
      },
    ]),
  );
  const wedgeMs = deps.wedgeMs ?? DEFAULT_WEDGE_MS;
  /** Sleeps and wakes running per GPU. */
  const actions = new Map<number, number>();
  const viewOf = (model: ConfiguredModel) => views.get(model.name)!;

  /** Per model and endpoint: the call in flight, which a later refresh joins instead of doubling. */
  const inFlight = new Map<string, Promise<void>>();

  /** Starts `call` for `endpoint` unless one is in flight; resolves when it (or the one in flight) settles. */
  function read<T>(
    model: ConfiguredModel,
    endpoint: Endpoint,
    call: () => Promise<T>,
    keep: (value: T, startedAtMs: number) => void,
  ) {
    const view = viewOf(model);
    const key = `${model.name}\n${endpoint}`;
    const running = inFlight.get(key);
    if (running) return running;
    const startedAtMs = nowMs();
    view.inFlightSinceMs[endpoint] = startedAtMs;
    const settled = call()
      .then(
        (value) => {
          keep(value, startedAtMs);
          view.outcomes[endpoint] = { ok: true, kind: null, message: null, atMs: nowMs() };
        },
        (err: unknown) => {
          view.outcomes[endpoint] = { ok: false, ...errorOf(err), atMs: nowMs() };
          if (endpoint === 'health') view.health = { value: false, atMs: nowMs() };
        },
      )
      .finally(() => {
        delete view.inFlightSinceMs[endpoint];
        inFlight.delete(key);
      });
    inFlight.set(key, settled);
    return settled;
  }

  function readProcesses(model: ConfiguredModel) {
    const view = viewOf(model);
    const pids = listeners.canSeeProcesses ? listeners.servingPids(model.port) : null;
    view.pids = { value: pids, atMs: nowMs() };
    view.stoppedPids = pids ? listeners.stoppedOf(pids) : [];
  }

  /**
   * When each model's last HTTP reads started: the background tick leaves a model a request just refreshed,
   * and no refresh reads again within `minReadIntervalMs`.
   */
  const refreshedAtMs = new Map<string, number>();

  function refreshOne(model: ConfiguredModel): Promise<unknown> {
    const view = viewOf(model);
    readProcesses(model);
    const at = nowMs();
    const readAtMs = refreshedAtMs.get(model.name);
    if (readAtMs !== undefined && at - readAtMs < (deps.minReadIntervalMs ?? 0)) return Promise.resolve();
    refreshedAtMs.set(model.name, at);
    return Promise.all([
      read(
        model,
        'sleeping',
        () => vllm.isSleeping(model.port),
        (v) => (view.sleeping = { value: v, atMs: nowMs() }),
      ),
      read(
        model,
        'metrics',
        () => vllm.metrics(model.port),
        (samples, startedAtMs) => {
          const reading = readingOf(samples, startedAtMs);
          view.requests = { value: { running: reading.running, waiting: reading.waiting }, atMs: nowMs() };
          view.engine = observeReading(view.engine, reading);
          if (isJudged(model) && isProbeDue(view.engine, nowMs(), wedgeMs)) probe(model);
        },
      ),
      read(
        model,
        'health',
        () => vllm.health(model.port),
        () => (view.health = { value: true, atMs: nowMs() }),
      ),
    ]);
  }

  /** The engine is judged only while it is known awake and no sleep or wake runs on its GPU. */
  const isJudged = (model: ConfiguredModel) =>
    viewOf(model).sleeping?.value === false && !(actions.get(model.gpuIndex) ?? 0);

  /** Sends one synthetic completion (max_tokens 1) bounded by half the wedge window, and records its end. */
  function probe(model: ConfiguredModel) {
    const view = viewOf(model);
    const { epoch } = view;
    view.engine = probeStarted(view.engine, nowMs());
    const body = { model: model.name, prompt: PROBE_PROMPT, max_tokens: 1, temperature: 0 };
    void vllm
      .completion(model.port, body, wedgeMs / 2)
      .then(
        (res): ProbeOutcome => ({
          kind: 'answered',
          status: res.status,
          detail: describeVllmStatus(res.status, res.body),
          atMs: nowMs(),
        }),
        (err: unknown): ProbeOutcome =>
          err instanceof VllmError && err.kind === 'timeout'
            ? { kind: 'timeout', atMs: nowMs() }
            : { kind: 'failed', atMs: nowMs() },
      )
      .then((outcome) => {
        if (view.epoch === epoch) view.engine = probeEnded(view.engine, outcome);
      });
  }

  function conditionOf(view: ModelView, at: number, engine: EngineVerdict | null): ModelCondition {
    const pids = view.pids?.value ?? null;
    if (pids && pids.length > 0 && view.stoppedPids.length === pids.length) return 'frozen';
    const outcomes = Object.values(view.outcomes);
    const latest = outcomes.reduce<Outcome | null>((a, b) => (a && a.atMs >= b.atMs ? a : b), null);
    // Refused with nothing listening: the server is gone (a server in another pid namespace still answers).
    if (latest && !latest.ok && latest.kind === 'refused' && !(pids && pids.length > 0)) return 'gone';
    // Before busy: a stuck engine core also leaves /is_sleeping unanswered while /metrics still speaks.
    if (engine) return engine.condition;
    const isSlow = Object.values(view.inFlightSinceMs).some((since) => at - since >= slowMs);
    if (isSlow || outcomes.some((o) => !o.ok && o.kind === 'timeout')) return 'busy';
    if (outcomes.length === 0) return 'unknown';
    return 'ready';
  }

  function statusOf(model: ConfiguredModel, at: number): ModelStatus {
    const view = viewOf(model);
    const engine = isJudged(model) ? judgeEngine(view.engine, wedgeMs) : null;
    if ((engine?.condition ?? null) !== view.reported) {
      view.reported = engine?.condition ?? null;
      if (engine) deps.logger?.warn('model engine not serving', { model: model.name, error: engine.message });
      else deps.logger?.info('model engine verdict cleared', { model: model.name });
    }
    const condition = conditionOf(view, at, engine);
    const age = (r: { atMs: number } | null) => (r ? Math.max(0, at - r.atMs) : null);
    const failed = view.outcomes.sleeping?.ok === false ? view.outcomes.sleeping : null;
    const slowSince = view.inFlightSinceMs.sleeping;
    const slow =
      slowSince !== undefined && at - slowSince >= slowMs
        ? `GET /is_sleeping on port ${model.port} unanswered for ${at - slowSince} ms`
        : null;
    const known = condition !== 'gone' && view.sleeping;
    return {
      name: model.name,
      gpuIndex: model.gpuIndex,
      port: model.port,
      state: known ? (known.value ? 'asleep' : 'awake') : 'unknown',
      // A gone server runs nothing; a busy one keeps its last counts, with their age.
      runningRequests: condition === 'gone' ? null : (view.requests?.value.running ?? null),
      waitingRequests: condition === 'gone' ? null : (view.requests?.value.waiting ?? null),
      error: (condition === engine?.condition ? engine.message : null) ?? slow ?? failed?.message ?? null,
      stateAgeMs: age(view.sleeping),
      requestsAgeMs: age(view.requests),
      condition,
      processes: {
        pids: view.pids?.value ?? null,
        stoppedPids: view.stoppedPids,
        healthOk: view.health?.value ?? null,
        pidsAgeMs: age(view.pids),
        healthAgeMs: age(view.health),
      },
    };
  }

  let timer: NodeJS.Timeout | null = null;
  /**
   * Re-reads every model's processes at once (cheap, never stuck behind vLLM) and starts each HTTP read not
   * already in flight; resolves when every read, new or joined, has settled.
   */
  function refresh(): Promise<unknown> {
    return Promise.all(deps.models.map(refreshOne));
  }

  return {
    refresh,
    /**
     * Refreshes every `refreshMs` in the background until `stop` (the timer does not hold the process), each
     * model whose last refresh started at least 90 % of that ago: where the monitor polls more often than that
     * (every 500 ms by default) its requests keep the view fresh, and a tick would only double vLLM's admin
     * reads.
     */
    start(refreshMs = STATUS_REFRESH_MS) {
      void refresh();
      const staleMs = Math.floor(refreshMs * 0.9);
      timer ??= setInterval(() => {
        const at = nowMs();
        for (const model of deps.models) {
          if (at - (refreshedAtMs.get(model.name) ?? 0) >= staleMs) void refreshOne(model);
        }
      }, refreshMs);
      timer.unref();
    },
    stop() {
      if (timer) clearInterval(timer);
      timer = null;
    },
    /**
     * Every model as the view holds it now, after waiting at most `freshWaitMs` for a refresh this call
     * starts (so an idle host answers with fresh figures and a busy one answers in time regardless).
     */
    async snapshot(freshWaitMs = STATUS_FRESH_WAIT_MS): Promise<ModelStatus[]> {
      let timer: NodeJS.Timeout | undefined;
      await Promise.race([refresh(), new Promise((resolve) => (timer = setTimeout(resolve, freshWaitMs)))]);
      clearTimeout(timer);
      const at = nowMs();
      return deps.models.map((m) => statusOf(m, at));
    },
    /**
     * A sleep or wake starts (`isRunning`) or ends on `gpuIndex`: its engines are not judged meanwhile, and each
     * judgement starts afresh after it (what the engine did before a sleep says nothing of it after a wake).
     */
    onGpuAction(gpuIndex: number, isRunning: boolean) {
      actions.set(gpuIndex, (actions.get(gpuIndex) ?? 0) + (isRunning ? 1 : -1));
      for (const model of deps.models.filter((m) => m.gpuIndex === gpuIndex)) {
        const view = viewOf(model);
        view.engine = newEngineRecord();
        view.epoch += 1;
      }
    },
    /** Records a sleep state an action just proved (sleep, wake), so the view does not lag behind it. */
    recordSleeping(name: string, sleeping: boolean) {
      const view = views.get(name);
      if (view) view.sleeping = { value: sleeping, atMs: nowMs() };
    },
  };
}
export type StatusView = ReturnType<typeof createStatusView>;

/** The inference controller and the status view its proved sleep states keep current: one wiring for every host. */
export function createObservedInference(deps: {
  config: SupervisorConfig;
  vllm: VllmClient;
  logger: Logger;
  listeners: ListenerTable;
  now: () => Date;
  slowMs?: number;
  minReadIntervalMs?: number;
  wedgeMs?: number;
}) {
  const holder: { view?: StatusView } = {};
  const inference = createInferenceController({
    config: deps.config,
    vllm: deps.vllm,
    logger: deps.logger,
    onProvedSleeping: (model, sleeping) => holder.view?.recordSleeping(model, sleeping),
    onGpuAction: (gpuIndex, isRunning) => holder.view?.onGpuAction(gpuIndex, isRunning),
  });
  const statusView = createStatusView({ ...deps, models: inference.models });
  holder.view = statusView;
  return { inference, statusView };
}
