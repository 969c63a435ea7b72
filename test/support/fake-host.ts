/** An in-memory GPU host behind a SupervisorClient, for activity tests that script a supervisor's answers. */
import { ApplicationFailure } from '@temporalio/common';
import { Headers, Response, type fetch as undiciFetch } from 'undici';
import type { SupervisorClient } from '../../activities/supervisor-client';
import type { SupervisorTarget } from '../../clients/supervisor-access';
import { FailureType } from '../../schemas/failures';
import type {
  GpuMemory,
  ModelAwakeState,
  ModelCondition,
  ProbeModelResult,
  SupervisorActionResponse,
  SupervisorStatus,
  TrainingRunStatus,
} from '../../schemas/supervisor';
import { T0 } from './fleet-fixtures';

interface HostModel {
  name: string;
  gpuIndex: number;
  state: ModelAwakeState;
  runningRequests: number | null;
  /** `vllm:num_requests_waiting` (absent: a supervisor older than the count). */
  waitingRequests?: number | null;
  /** The status view's reading (absent: a supervisor older than the view). */
  condition?: ModelCondition;
}

/** A GPU of a supervisor's memory report, read from the device unless `fields` say otherwise. */
export const gpuMemory = (
  fields: Partial<GpuMemory> & Pick<GpuMemory, 'index' | 'usedMiB' | 'totalMiB'>,
): GpuMemory => ({
  uuid: `GPU-${fields.index}`,
  processes: [],
  source: 'device',
  migDevice: null,
  error: null,
  models: [],
  ...fields,
});

/** An in-memory GPU host. Its `client` answers like a supervisor; tests change state and script failures. */
export class FakeHost {
  models: HostModel[] = [{ name: 'llama', gpuIndex: 0, state: 'asleep', runningRequests: 0 }];
  /** The `mode` of each sleep asked for, in order (`default` when none). */
  sleepModes: string[] = [];
  training: TrainingRunStatus[] = [{ gpuIndex: 0, state: 'running', pids: [4242], startedAt: T0, lastExit: null }];
  gpus: GpuMemory[] = [
    gpuMemory({
      index: 0,
      uuid: 'GPU-0',
      usedMiB: 70_000,
      totalMiB: 80_000,
      processes: [{ pid: 4242, usedMiB: 69_000 }],
    }),
  ];
  probeResults: ProbeModelResult[] | null = null;
  /** What the fake models answer a fingerprint prompt, and the logprob they give each token of a stored answer. */
  greedyText = ' ready';
  answerLogprob = -0.1;
  /** The pid the fake reports serving every model's port (a restarted server gets another). */
  vllmPid = 7000;
  calls: string[] = [];
  /** Thrown by the next call of the named method (then cleared). */
  failures = new Map<string, Error>();
  /** Runs on every status read: the place to make time pass on the host. */
  onStatus: (host: FakeHost, reads: number) => void = () => undefined;
  /** What training stop does (default: the run exits at once and its memory is released). */
  onStop: (host: FakeHost, gpuIndex: number) => void = (host, gpuIndex) => host.exitTraining(gpuIndex);
  private reads = 0;
  private nextPid = 5000;

  exitTraining(gpuIndex: number, code: number | null = null): void {
    const run = this.training.find((r) => r.gpuIndex === gpuIndex)!;
    const pids = run.pids;
    Object.assign(run, {
      state: 'idle',
      pids: [],
      lastExit: { code, signal: code === null ? 'SIGTERM' : null, at: T0 },
    });
    for (const gpu of this.gpus) {
      const held = gpu.processes.filter((p) => pids.includes(p.pid)).reduce((n, p) => n + (p.usedMiB ?? 0), 0);
      gpu.processes = gpu.processes.filter((p) => !pids.includes(p.pid));
      if (gpu.usedMiB !== null) gpu.usedMiB -= held;
    }
  }

  private take(method: string): void {
    this.calls.push(method);
    const err = this.failures.get(method);
    if (err) {
      this.failures.delete(method);
      throw err;
    }
  }

  /** What the models' servingUrls answer (the proxy's path): status and body; `refused` drops the connection. */
  serving: { status: number; body: unknown } | 'refused' = {
    status: 200,
    body: { choices: [{ message: { role: 'assistant', content: 'ok' } }] },
  };
  /** Each request sent to a servingUrl: its URL and Authorization header. */
  servingCalls: { url: string; authorization: string | null }[] = [];
  /** Answers for the servingUrls, as `fetch` (the probe through servingUrl). */
  readonly servingFetch: typeof undiciFetch = async (input, init) => {
    const headers = new Headers(init?.headers);
    this.servingCalls.push({ url: String(input), authorization: headers.get('authorization') });
    if (this.serving === 'refused') {
      throw new TypeError('fetch failed', {
        cause: Object.assign(new Error('connect ECONNREFUSED'), { code: 'ECONNREFUSED' }),
      });
    }
    return new Response(JSON.stringify(this.serving.body), { status: this.serving.status });
  };

  private action(gpuIndexes: number[]): SupervisorActionResponse {
    return { accepted: true, gpuIndexes, errors: [] };
  }

  readonly client: SupervisorClient = {
    status: async (_target, opts) => {
      if (opts?.signal?.aborted) throw opts.signal.reason;
      this.take('status');
      this.onStatus(this, ++this.reads);
      const status: SupervisorStatus = {
        models: this.models.map((m) => ({ ...m, port: 8000, error: null })),
        training: structuredClone(this.training),
        at: new Date().toISOString(),
      };
      return status;
    },
    gpuMemory: async () => {
      this.take('gpuMemory');
      return { gpus: structuredClone(this.gpus), at: new Date().toISOString() };
    },
    sleep: async (_target, body) => {
      this.take(`sleep:${body.gpuIndex}:${body.level}`);
      this.sleepModes.push(body.mode ?? 'default');
      for (const m of this.models.filter((x) => x.gpuIndex === body.gpuIndex)) m.state = 'asleep';
      return this.action([body.gpuIndex ?? 0]);
    },
    wake: async (_target, body) => {
      this.take(`wake:${body.gpuIndex}`);
      for (const m of this.models.filter((x) => x.gpuIndex === body.gpuIndex)) m.state = 'awake';
      return this.action([body.gpuIndex ?? 0]);
    },
    startTraining: async (_target, body) => {
      this.take(`startTraining:${body.gpuIndex}`);
      const run = this.training.find((r) => r.gpuIndex === body.gpuIndex)!;
      if (run.state === 'idle') Object.assign(run, { state: 'running', pids: [this.nextPid++], startedAt: T0 });
      return this.action([body.gpuIndex ?? 0]);
    },
    stopTraining: async (_target, body) => {
      this.take(`stopTraining:${body.gpuIndex}:${body.graceMs}`);
      const run = this.training.find((r) => r.gpuIndex === body.gpuIndex);
      // The supervisor's 404 (NoSlotError), as the client reports it.
      if (!run) {
        throw ApplicationFailure.nonRetryable(
          `HTTP 404: GPU ${body.gpuIndex} has no training slot on this host`,
          FailureType.InvalidTarget,
        );
      }
      if (run.state === 'running') run.state = 'stopping';
      const stopping = run.pids.length > 0 ? [{ gpuIndex: run.gpuIndex, pids: [...run.pids] }] : [];
      this.onStop(this, body.gpuIndex ?? 0);
      return { ...this.action([body.gpuIndex ?? 0]), stopping };
    },
    probe: async (_target, body) => {
      this.take('probe');
      const results =
        this.probeResults ?? (body.models ?? []).map((model) => ({ model, ok: true, latencyMs: 12, error: null }));
      return { results };
    },
    fingerprint: async (_url, body) => {
      this.take('fingerprint');
      const results = (body.models ?? []).map((model) => ({
        model,
        ok: true,
        error: null,
        text: this.greedyText,
        tokens: [' ready'],
        tokenLogprobs: [-0.1],
        serverPid: this.vllmPid,
      }));
      return { results };
    },
    scoreFingerprint: async (_url, body) => {
      this.take('scoreFingerprint');
      const results = body.answers.map((a) => ({
        model: a.model,
        ok: true,
        error: null,
        tokenLogprobs: Array.from({ length: a.tokenCount }, () => this.answerLogprob),
      }));
      return { results };
    },
  };
}

/** The failure a supervisor client throws for a dead host. */
/** A supervisor that cannot be reached (no route to it): one failed poll, never confirmed as the host's death. */
export const unreachable = (): ApplicationFailure =>
  ApplicationFailure.retryable('supervisor GET /v1/status: EHOSTUNREACH', FailureType.SupervisorUnreachable);

/** A supervisor that refuses connections (nothing listens): confirmed as the host's death when its model ports refuse too. */
export const refused = (): ApplicationFailure =>
  ApplicationFailure.retryable(
    'supervisor GET /v1/status: ECONNREFUSED connect ECONNREFUSED 127.0.0.1:9',
    FailureType.SupervisorUnreachable,
  );

/** One SupervisorClient over several fake hosts, chosen by supervisor URL. */
export function routedClient(hosts: Record<string, FakeHost>): SupervisorClient {
  const pick = (target: SupervisorTarget) => {
    const host = hosts[target.supervisorUrl];
    if (!host) throw new Error(`no fake host at ${target.supervisorUrl}`);
    return host.client;
  };
  return {
    status: (t, o) => pick(t).status(t, o),
    gpuMemory: (t, o) => pick(t).gpuMemory(t, o),
    sleep: (t, b, o) => pick(t).sleep(t, b, o),
    wake: (t, b, o) => pick(t).wake(t, b, o),
    startTraining: (t, b, o) => pick(t).startTraining(t, b, o),
    stopTraining: (t, b, o) => pick(t).stopTraining(t, b, o),
    probe: (t, b, o) => pick(t).probe(t, b, o),
    fingerprint: (t, b, o) => pick(t).fingerprint(t, b, o),
    scoreFingerprint: (t, b, o) => pick(t).scoreFingerprint(t, b, o),
  };
}
