/**
 * Test doubles for activity tests: an in-memory GPU host behind a SupervisorClient, and an in-memory
 * store with the few repository methods activities use. Not used by production code.
 */
import { ApplicationFailure } from '@temporalio/common';
import { MockActivityEnvironment } from '@temporalio/testing';
import { DefaultLogger } from '@temporalio/worker';
import type { Store } from '../db/store';
import type { DomainSnapshot, FleetSnapshot, Slot } from '../schemas/entities';
import type { DomainState, SlotState } from '../schemas/enums';
import { FailureType } from '../schemas/failures';
import { defaultFleetPolicy, type FleetPolicy } from '../schemas/policy';
import type {
  GpuMemory,
  ModelAwakeState,
  ProbeModelResult,
  SupervisorActionResponse,
  SupervisorStatus,
  TrainingRunStatus,
} from '../schemas/supervisor';
import type { SupervisorClient } from './supervisor-client';

export const T0 = '2030-01-01T00:00:00.000Z';
export const IDS = {
  fleet: '10000000-0000-4000-8000-000000000001',
  a: '10000000-0000-4000-8000-00000000000a',
  b: '10000000-0000-4000-8000-00000000000b',
  aInference: '10000000-0000-4000-8000-0000000000a1',
  aTraining: '10000000-0000-4000-8000-0000000000a2',
  bInference: '10000000-0000-4000-8000-0000000000b1',
  bTraining: '10000000-0000-4000-8000-0000000000b2',
} as const;

/** A domain with GPU 0 running model `llama` (level-1 sleep) and a trainer. */
export function domainSnapshot(which: 'a' | 'b', overrides: Partial<DomainSnapshot> = {}): DomainSnapshot {
  const id = IDS[which];
  return {
    id,
    fleetId: IDS.fleet,
    slug: which === 'a' ? 'east' : 'west',
    displayName: which,
    provider: 'static',
    placement: {},
    supervisorUrl: `http://supervisor-${which}/`,
    servingBaseUrl: null,
    launch: null,
    state: 'ready',
    stateChangedAt: T0,
    lastSeenAt: T0,
    consecutiveFailures: 0,
    lastError: null,
    isActive: which === 'a',
    slots: [
      {
        id: which === 'a' ? IDS.aInference : IDS.bInference,
        domainId: id,
        gpuIndex: 0,
        stateChangedAt: T0,
        kind: 'inference',
        state: which === 'a' ? 'serving' : 'sleeping',
        sleepLevel: 1,
        models: [{ name: 'llama', servingUrl: `http://vllm-${which}/v1` }],
      },
      {
        id: which === 'a' ? IDS.aTraining : IDS.bTraining,
        domainId: id,
        gpuIndex: 0,
        stateChangedAt: T0,
        kind: 'training',
        state: which === 'a' ? 'idle' : 'training',
        command: ['train'],
        checkpointDir: '/ckpt',
        env: {},
      },
    ],
    ...overrides,
  };
}

export interface FakeStore extends Store {
  state: { fleet: FleetSnapshot; events: { type: string; message: string; data?: Record<string, unknown> }[] };
  slotMoves: { slotId: string; to: SlotState }[];
}

/** An in-memory store over one fleet (active `a`, standby `b`); unimplemented methods throw. */
export function fakeStore(opts: { policy?: Partial<FleetPolicy>; domains?: DomainSnapshot[] } = {}): FakeStore {
  const fleet: FleetSnapshot = {
    id: IDS.fleet,
    slug: 'prod',
    displayName: 'prod',
    activeDomainId: IDS.a,
    routeRevision: 1,
    policy: { ...defaultFleetPolicy(), ...opts.policy },
    createdAt: T0,
    updatedAt: T0,
    inFlightOperation: null,
    domains: opts.domains ?? [domainSnapshot('a'), domainSnapshot('b')],
  };
  const state: FakeStore['state'] = { fleet, events: [] };
  const slotMoves: FakeStore['slotMoves'] = [];
  const findDomain = (id: string) => state.fleet.domains.find((d) => d.id === id) ?? null;
  const strip = (d: DomainSnapshot) => {
    const { slots: _slots, isActive: _isActive, ...domain } = d;
    return domain;
  };
  const notHere = () => {
    throw new Error('not implemented by the fake store');
  };
  const store = {
    fleets: {
      snapshot: async (ref: string) =>
        ref === state.fleet.id || ref === state.fleet.slug
          ? structuredClone({
              ...state.fleet,
              domains: state.fleet.domains.map((d) => ({ ...d, isActive: d.id === state.fleet.activeDomainId })),
            })
          : null,
      list: async () => [structuredClone(state.fleet)],
      routeRevision: async () => state.fleet.routeRevision,
      commitRouting: notHere,
    },
    domains: {
      get: async (id: string) => {
        const d = findDomain(id);
        return d ? structuredClone(strip(d)) : null;
      },
      listByFleet: async () => state.fleet.domains.map((d) => structuredClone(strip(d))),
      transition: async (
        id: string,
        to: DomainState,
        o: { lastError?: string | null; from?: readonly DomainState[] } = {},
      ) => {
        const d = findDomain(id);
        if (!d || d.state === to || (o.from && !o.from.includes(d.state))) return null;
        d.state = to;
        d.stateChangedAt = new Date().toISOString();
        if (o.lastError !== undefined) d.lastError = o.lastError;
        return structuredClone(strip(d));
      },
      recordPoll: async (id: string, poll: { ok: boolean; at: Date; error?: string }) => {
        const d = findDomain(id)!;
        if (poll.ok) Object.assign(d, { lastSeenAt: poll.at.toISOString(), consecutiveFailures: 0, lastError: null });
        else
          Object.assign(d, { consecutiveFailures: d.consecutiveFailures + 1, lastError: poll.error ?? 'poll failed' });
        return structuredClone(strip(d));
      },
      recordPolls: async (polls: { domainId: string; ok: boolean; at: Date; error?: string }[]) =>
        Promise.all(polls.map(({ domainId, ...poll }) => store.domains.recordPoll(domainId, poll))),
    },
    slots: {
      get: notHere,
      listByDomain: async (id: string) => structuredClone(findDomain(id)?.slots ?? []),
      transition: async (slotId: string, to: SlotState) => {
        const slot = state.fleet.domains.flatMap((d) => d.slots).find((s) => s.id === slotId);
        if (!slot || slot.state === to) return null;
        (slot as Slot).state = to as never;
        slotMoves.push({ slotId, to });
        return structuredClone(slot);
      },
    },
    operations: new Proxy({}, { get: () => notHere }),
    events: {
      append: async (e: { type: string; message: string; data?: Record<string, unknown> }) => {
        state.events.push(e);
        return { id: state.events.length, ...e };
      },
      list: notHere,
    },
  };
  return Object.assign(store as unknown as Store, { state, slotMoves });
}

interface HostModel {
  name: string;
  gpuIndex: number;
  state: ModelAwakeState;
  runningRequests: number | null;
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

  private action(gpuIndexes: number[]): SupervisorActionResponse {
    return { accepted: true, gpuIndexes, errors: [] };
  }

  readonly client: SupervisorClient = {
    status: async (_url, opts) => {
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
    sleep: async (_url, body) => {
      this.take(`sleep:${body.gpuIndex}:${body.level}`);
      for (const m of this.models.filter((x) => x.gpuIndex === body.gpuIndex)) m.state = 'asleep';
      return this.action([body.gpuIndex ?? 0]);
    },
    wake: async (_url, body) => {
      this.take(`wake:${body.gpuIndex}`);
      for (const m of this.models.filter((x) => x.gpuIndex === body.gpuIndex)) m.state = 'awake';
      return this.action([body.gpuIndex ?? 0]);
    },
    startTraining: async (_url, body) => {
      this.take(`startTraining:${body.gpuIndex}`);
      const run = this.training.find((r) => r.gpuIndex === body.gpuIndex)!;
      if (run.state === 'idle') Object.assign(run, { state: 'running', pids: [this.nextPid++], startedAt: T0 });
      return this.action([body.gpuIndex ?? 0]);
    },
    stopTraining: async (_url, body) => {
      this.take(`stopTraining:${body.gpuIndex}:${body.graceMs}`);
      const run = this.training.find((r) => r.gpuIndex === body.gpuIndex)!;
      if (run.state === 'running') run.state = 'stopping';
      this.onStop(this, body.gpuIndex ?? 0);
      return this.action([body.gpuIndex ?? 0]);
    },
    probe: async (_url, body) => {
      this.take('probe');
      const results =
        this.probeResults ?? (body.models ?? []).map((model) => ({ model, ok: true, latencyMs: 12, error: null }));
      return { results };
    },
  };
}

/** The failure a supervisor client throws for a dead host. */
export const unreachable = (): ApplicationFailure =>
  ApplicationFailure.retryable('supervisor GET /v1/status: ECONNREFUSED', FailureType.SupervisorUnreachable);

/** A MockActivityEnvironment that does not log every expected activity failure. */
export const quietEnvironment = (info: ConstructorParameters<typeof MockActivityEnvironment>[0] = {}) =>
  new MockActivityEnvironment(info, { logger: new DefaultLogger('ERROR', () => undefined) });

/** One SupervisorClient over several fake hosts, chosen by supervisor URL. */
export function routedClient(hosts: Record<string, FakeHost>): SupervisorClient {
  const pick = (url: string) => {
    const host = hosts[url];
    if (!host) throw new Error(`no fake host at ${url}`);
    return host.client;
  };
  return {
    status: (url, o) => pick(url).status(url, o),
    gpuMemory: (url, o) => pick(url).gpuMemory(url, o),
    sleep: (url, b, o) => pick(url).sleep(url, b, o),
    wake: (url, b, o) => pick(url).wake(url, b, o),
    startTraining: (url, b, o) => pick(url).startTraining(url, b, o),
    stopTraining: (url, b, o) => pick(url).stopTraining(url, b, o),
    probe: (url, b, o) => pick(url).probe(url, b, o),
  };
}

/** `env.run` with the activity's own types (MockActivityEnvironment's generics lose them). */
// eslint-disable-next-line @typescript-eslint/no-explicit-any
export function runIn<F extends (...args: any[]) => Promise<unknown>>(
  env: MockActivityEnvironment,
  fn: F,
  ...args: Parameters<F>
): ReturnType<F> {
  return env.run(fn as never, ...(args as unknown as never[])) as ReturnType<F>;
}
