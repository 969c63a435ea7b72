/**
 * The supervisor-call activities against a scripted host. The in-memory store is enough here: these
 * activities only read the domain's layout and record slot states they observed, and what is tested is
 * how they drive and wait on the supervisor. The slot writes' SQL is tested against Postgres in db/.
 */
import { ApplicationFailure, CancelledFailure } from '@temporalio/common';
import { stepMessages } from '../core/step-messages';
import { createUpstreamCredentials } from '../lib/secret-ref';
import { FailureType } from '../schemas/failures';
import { quietEnvironment } from '../test/support/activity-environment';
import { FakeHost, gpuMemory } from '../test/support/fake-host';
import { fakeStore } from '../test/support/fake-store';
import { domainSnapshot, IDS } from '../test/support/fleet-fixtures';
import { createSupervisorActivities, WAKE_MEMORY_MAX_AGE_MS } from './supervisor';

function setup(opts: Parameters<typeof fakeStore>[0] = {}) {
  const host = new FakeHost();
  const store = fakeStore(opts);
  const acts = createSupervisorActivities({
    store,
    supervisor: host.client,
    now: () => new Date(),
    pollIntervalMs: 2,
    trainingSettleMs: 5,
    fetch: host.servingFetch,
    upstreamCredentials: createUpstreamCredentials({ HARU_SECRET_UPSTREAM_KEY: 'upstream-key-1' }, () => {
      throw new Error('ENOENT');
    }),
  });
  // A step budget of a minute (the mock's default of 1 s would end slow cases by the step budget).
  const env = quietEnvironment({ attempt: 1, scheduledTimestampMs: Date.now(), scheduleToCloseTimeoutMs: 60_000 });
  const heartbeats: unknown[] = [];
  env.on('heartbeat', (d: unknown) => heartbeats.push(d));
  return { host, store, acts, env, heartbeats };
}

const failureOf = async (p: Promise<unknown>): Promise<ApplicationFailure> => {
  const err = await p.then(
    () => null,
    (e: unknown) => e,
  );
  expect(err).toBeInstanceOf(ApplicationFailure);
  return err as ApplicationFailure;
};

describe('stopTraining', () => {
  it('stops every training slot with the grace and waits until each reports idle, heartbeating meanwhile', async () => {
    const { host, store, acts, env, heartbeats } = setup();
    host.onStop = () => undefined; // the trainer takes a while to exit
    host.onStatus = (h, reads) => reads === 5 && h.exitTraining(0);
    const result = await env.run(acts.stopTraining, { domainId: IDS.b, graceMs: 1_500 });
    // When the trainer ended, on the host's clock: the release step's reading counts from there.
    expect(result).toEqual({ attempt: 1, trainerPids: [4242], trainerEndedAt: host.training[0]!.lastExit!.at });
    expect(host.calls).toContain('stopTraining:0:1500');
    expect(host.training[0]).toMatchObject({ state: 'idle', pids: [] });
    expect(heartbeats).toContainEqual({
      waitingFor: 'training still running on GPU 0 (stopping, pids 4242)',
      trainerPids: [4242],
    });
    expect(store.slotMoves).toEqual([
      { slotId: IDS.bTraining, to: 'stopping' },
      { slotId: IDS.bTraining, to: 'idle' },
    ]);
  });

  it('remembers trainer pids seen by an earlier attempt (heartbeat details)', async () => {
    const host = new FakeHost();
    host.training[0] = { gpuIndex: 0, state: 'idle', pids: [], startedAt: null, lastExit: null };
    const acts = createSupervisorActivities({
      store: fakeStore(),
      supervisor: host.client,
      now: () => new Date(),
      pollIntervalMs: 2,
    });
    const retry = quietEnvironment({ attempt: 2, heartbeatDetails: { trainerPids: [777] } });
    const heartbeats: unknown[] = [];
    retry.on('heartbeat', (d: unknown) => heartbeats.push(d));
    expect(await retry.run(acts.stopTraining, { domainId: IDS.b, graceMs: 10 })).toEqual({
      attempt: 2,
      trainerPids: [777],
      trainerEndedAt: host.training[0]!.lastExit!.at,
    });
    // Every heartbeat keeps them, the ones sent while the stop request waits included.
    expect(heartbeats.length).toBeGreaterThan(0);
    for (const beat of heartbeats) expect(beat).toMatchObject({ trainerPids: [777] });
  });

  it('does nothing for a domain without training slots', async () => {
    const b = domainSnapshot('b');
    const { host, acts, env } = setup({
      domains: [domainSnapshot('a'), { ...b, slots: b.slots.filter((s) => s.kind === 'inference') }],
    });
    expect(await env.run(acts.stopTraining, { domainId: IDS.b, graceMs: 10 })).toEqual({
      attempt: 1,
      trainerPids: [],
      trainerEndedAt: null,
    });
    expect(host.calls).toEqual([]);
  });

  it('ends with the cancellation when cancelled while waiting', async () => {
    const { host, acts, env } = setup();
    host.onStop = () => undefined;
    host.onStatus = (_h, reads) => reads === 3 && env.cancel('CANCELLED');
    await expect(env.run(acts.stopTraining, { domainId: IDS.b, graceMs: 10 })).rejects.toBeInstanceOf(CancelledFailure);
    expect(host.training[0]?.state).toBe('stopping');
  });

  it('refuses a layout GPU the supervisor has no trainer on (non-retryable InvalidTarget)', async () => {
    const { host, acts, env } = setup();
    host.training = [];
    const failure = await failureOf(env.run(acts.stopTraining, { domainId: IDS.b, graceMs: 10 }));
    expect(failure).toMatchObject({ type: FailureType.InvalidTarget, nonRetryable: true });
  });

  it('passes a supervisor failure through for Temporal to retry', async () => {
    const { host, acts, env } = setup();
    host.failures.set('stopTraining:0:10', ApplicationFailure.retryable('HTTP 503', FailureType.SupervisorUnreachable));
    const failure = await failureOf(env.run(acts.stopTraining, { domainId: IDS.b, graceMs: 10 }));
    expect(failure).toMatchObject({ type: FailureType.SupervisorUnreachable, nonRetryable: false });
  });
});

describe('verifyGpuReleased', () => {
  it('takes its first reading from the host since the trainers ended, and every later one afresh', async () => {
    const { host, acts, env } = setup();
    host.training[0]!.state = 'idle';
    const asked: (string | undefined)[] = [];
    const read = host.client.gpuMemory;
    host.client.gpuMemory = async (url, o) => {
      asked.push(o?.since);
      if (asked.length === 2) host.exitTraining(0);
      return read(url, o);
    };
    const since = '2030-01-01T00:00:01.000Z';
    await env.run(acts.verifyGpuReleased, {
      domainId: IDS.b,
      trainerPids: [4242],
      trainerEndedAt: since,
      maxUsedRatio: 0.1,
    });
    expect(asked).toEqual([since, undefined]);
  });

  it('waits until the stopped trainers hold no memory and nothing else holds more than the tolerance', async () => {
    const { host, acts, env, heartbeats } = setup();
    host.training[0]!.state = 'idle';
    let reads = 0;
    const read = host.client.gpuMemory;
    host.client.gpuMemory = async (url, o) => {
      reads += 1;
      if (reads === 3) host.exitTraining(0);
      return read(url, o);
    };
    const result = await env.run(acts.verifyGpuReleased, { domainId: IDS.b, trainerPids: [4242], maxUsedRatio: 0.1 });
    expect(result).toEqual({
      attempt: 1,
      gpus: [
        {
          index: 0,
          usedMiB: 1_000,
          totalMiB: 80_000,
          otherMiB: 1_000,
          freeMiB: 79_000,
          wakeNeedMiB: 0,
          proof: 'device totals',
        },
      ],
    });
    expect(heartbeats[0]).toMatchObject({
      waitingFor:
        'GPU 0: trainer pid 4242 still holds 69000 MiB; GPU 0: 70000 MiB held besides its vLLM servers (max 8000 MiB, 10% of 80000) (held by pid 4242 69000 MiB)',
    });
  });

  it('keeps waiting while the models would not fit on wake, naming the figures and the processes', async () => {
    const { host, acts, env, heartbeats } = setup();
    host.gpus[0] = gpuMemory({
      index: 0,
      usedMiB: 10_500,
      totalMiB: 80_000,
      processes: [
        { pid: 101, usedMiB: 3_000 },
        { pid: 7, usedMiB: 7_500 },
      ],
      models: [{ name: 'llama', pids: [101], residueMiB: 3_000, wakeNeedMiB: 72_000 }],
    });
    let reads = 0;
    host.client.gpuMemory = async () => {
      reads += 1;
      if (reads === 3) env.cancel('TIMED_OUT');
      return { gpus: structuredClone(host.gpus), at: '' };
    };
    await expect(
      env.run(acts.verifyGpuReleased, { domainId: IDS.b, trainerPids: [4242], maxUsedRatio: 0.1 }),
    ).rejects.toBeInstanceOf(CancelledFailure);
    expect(heartbeats).toContainEqual(
      expect.objectContaining({
        waitingFor: 'GPU 0: 69500 MiB free, the models need 72000 MiB to wake (llama 72000) (held by pid 7 7500 MiB)',
      }),
    );
  });

  it.each(['permission', 'lost'] as const)(
    'fails at once (non-retryable) on a GPU whose memory reads as a %s error',
    async (kind) => {
      const { host, acts, env } = setup();
      const message = `GPU 0 (GPU-0): ${kind}: the fix`;
      host.gpus[0] = gpuMemory({ index: 0, usedMiB: null, totalMiB: null, error: { kind, message } });
      const failure = await failureOf(
        env.run(acts.verifyGpuReleased, { domainId: IDS.b, trainerPids: [4242], maxUsedRatio: 0.1 }),
      );
      expect(failure).toMatchObject({ type: FailureType.InvalidTarget, nonRetryable: true, message });
    },
  );

  it('keeps waiting on an unknown driver error and on a trainer pid whose memory is not reported', async () => {
    const { host, acts, env, heartbeats } = setup();
    host.gpus[0] = gpuMemory({
      index: 0,
      usedMiB: null,
      totalMiB: null,
      error: { kind: 'unknown', message: 'GPU 0: [Unknown Error]' },
    });
    let reads = 0;
    host.client.gpuMemory = async () => {
      reads += 1;
      if (reads === 2)
        host.gpus[0] = gpuMemory({
          index: 0,
          usedMiB: 10,
          totalMiB: 80_000,
          processes: [{ pid: 4242, usedMiB: null }],
        });
      if (reads === 4) env.cancel('TIMED_OUT');
      return { gpus: structuredClone(host.gpus), at: '' };
    };
    await expect(
      env.run(acts.verifyGpuReleased, { domainId: IDS.b, trainerPids: [4242], maxUsedRatio: 0.1 }),
    ).rejects.toBeInstanceOf(CancelledFailure);
    expect(heartbeats).toContainEqual(expect.objectContaining({ waitingFor: 'GPU 0: [Unknown Error]' }));
    expect(heartbeats).toContainEqual(
      expect.objectContaining({ waitingFor: 'GPU 0: trainer pid 4242 still holds an unreported amount of MiB' }),
    );
  });

  it('refuses a training GPU the supervisor does not report', async () => {
    const { host, acts, env } = setup();
    host.gpus = [];
    const failure = await failureOf(
      env.run(acts.verifyGpuReleased, { domainId: IDS.b, trainerPids: [], maxUsedRatio: 0.1 }),
    );
    expect(failure.type).toBe(FailureType.InvalidTarget);
  });
});

describe('wakeModels', () => {
  /** A standby whose training stopTraining has stopped, as a wake finds it. */
  const wakeSetup = () => {
    const context = setup();
    context.host.training[0] = { gpuIndex: 0, state: 'idle', pids: [], startedAt: null, lastExit: null };
    return context;
  };

  it('refuses to wake while training runs on the domain again (non-retryable PreconditionLost), asking for no wake', async () => {
    const { host, acts, env } = setup();
    const failure = await failureOf(env.run(acts.wakeModels, { domainId: IDS.b }));
    expect(failure).toMatchObject({ type: FailureType.PreconditionLost, nonRetryable: true });
    expect(failure.message).toBe(
      'training runs again on GPU 0 (running, pids 4242); refusing to wake models beside it',
    );
    expect(host.calls.filter((c) => c.startsWith('wake'))).toEqual([]);
  });

  it('refuses to wake when memory taken since the check leaves the engines too little (PreconditionLost), asking for no wake', async () => {
    const { host, acts, env } = wakeSetup();
    host.gpus = [
      gpuMemory({
        index: 0,
        usedMiB: 78_000,
        totalMiB: 80_000,
        processes: [{ pid: 777, usedMiB: 73_000 }],
        models: [{ name: 'llama', pids: [], residueMiB: 5_000, wakeNeedMiB: 60_000 }],
      }),
    ];
    const failure = await failureOf(env.run(acts.wakeModels, { domainId: IDS.b }));
    expect(failure).toMatchObject({ type: FailureType.PreconditionLost, nonRetryable: true });
    expect(failure.message).toBe(
      'GPU 0: 2000 MiB free, the models need 60000 MiB to wake; refusing to wake models that would not fit',
    );
    expect(host.calls.filter((c) => c.startsWith('wake'))).toEqual([]);
  });

  it("re-checks memory with the host's reading of the release step when it is at most a second old", async () => {
    const { host, acts, env } = wakeSetup();
    const asked: (number | undefined)[] = [];
    const read = host.client.gpuMemory;
    host.client.gpuMemory = async (t, o) => {
      asked.push(o?.maxAgeMs);
      return read(t, o);
    };
    host.onStatus = (h) => (h.models[0]!.state = 'awake');
    await env.run(acts.wakeModels, { domainId: IDS.b });
    expect(asked).toEqual([WAKE_MEMORY_MAX_AGE_MS]);
    expect(WAKE_MEMORY_MAX_AGE_MS).toBe(1_000);
  });

  it('wakes every inference GPU and waits until every layout model reports awake', async () => {
    const { host, store, acts, env, heartbeats } = wakeSetup();
    host.client.wake = async (_u, body) => {
      host.calls.push(`wake:${body.gpuIndex}`);
      return { accepted: true, gpuIndexes: [0], errors: [] };
    };
    host.onStatus = (h, reads) => {
      if (reads === 3) h.models[0]!.state = 'awake';
    };
    expect(await env.run(acts.wakeModels, { domainId: IDS.b })).toEqual({ attempt: 1, models: ['llama'] });
    // The precondition is read before the wake is asked for.
    expect(host.calls.slice(0, 3)).toEqual(['status', 'gpuMemory', 'wake:0']);
    expect(heartbeats.slice(0, 2)).toEqual([
      { waitingFor: 'wake of GPU 0' },
      { waitingFor: 'models not awake: llama (asleep)' },
    ]);
    expect(store.slotMoves).toEqual([
      { slotId: IDS.bInference, to: 'waking' },
      { slotId: IDS.bInference, to: 'probing' },
    ]);
  });

  it('heartbeats while a slow wake call is in flight, and aborts the call when cancelled', async () => {
    const { host, acts, env, heartbeats } = wakeSetup();
    let aborted = false;
    host.client.wake = (_u, _b, opts) =>
      new Promise((_resolve, reject) => {
        opts?.signal?.addEventListener('abort', () => {
          aborted = true;
          reject(opts.signal!.reason);
        });
      });
    const running = env.run(acts.wakeModels, { domainId: IDS.b });
    const deadline = Date.now() + 10_000;
    while (heartbeats.length < 2 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 50));
    expect(heartbeats.slice(0, 2)).toEqual([{ waitingFor: 'wake of GPU 0' }, { waitingFor: 'wake of GPU 0' }]);
    env.cancel('CANCELLED');
    await expect(running).rejects.toBeInstanceOf(CancelledFailure);
    expect(aborted).toBe(true);
  });

  it('throws retryable NotYet when the supervisor could not wake a model', async () => {
    const { host, acts, env } = wakeSetup();
    host.client.wake = async () => ({
      accepted: false,
      gpuIndexes: [0],
      errors: [{ target: 'llama', message: 'HTTP 500' }],
    });
    const failure = await failureOf(env.run(acts.wakeModels, { domainId: IDS.b }));
    expect(failure).toMatchObject({ type: FailureType.NotYet, nonRetryable: false });
    expect(failure.message).toBe('supervisor refused wake of GPU 0: llama: HTTP 500');
  });

  it('refuses a layout model the supervisor does not run (non-retryable InvalidTarget)', async () => {
    const { host, acts, env } = wakeSetup();
    host.models[0]!.name = 'other';
    const failure = await failureOf(env.run(acts.wakeModels, { domainId: IDS.b }));
    expect(failure).toMatchObject({ type: FailureType.InvalidTarget, nonRetryable: true });
  });
});

describe('probeModels', () => {
  const input = { domainId: IDS.b, prompt: 'ready?', maxTokens: 4, timeoutMs: 1_000 };

  it('passes when every layout model answers, and marks the slots serving', async () => {
    const { acts, env, store } = setup();
    expect(await env.run(acts.probeModels, input)).toEqual({
      attempt: 1,
      results: [
        {
          model: 'llama',
          latencyMs: 12,
          fingerprint: {
            verdict: 'none',
            storedScore: null,
            wokenScore: null,
            note: 'llama: no stored fingerprint, non-blank check only',
          },
        },
      ],
    });
    expect(store.slotMoves).toEqual([{ slotId: IDS.bInference, to: 'serving' }]);
  });

  /** Domain b with every model's `upstreamAuth` naming `env`. */
  const keyedB = (env: string) => {
    const b = domainSnapshot('b');
    for (const slot of b.slots) {
      if (slot.kind === 'inference') slot.models = slot.models.map((m) => ({ ...m, upstreamAuth: { env } }));
    }
    return { domains: [domainSnapshot('a'), b] };
  };

  it('probes each model through its servingUrl too, with the token its upstreamAuth names', async () => {
    const { host, acts, env } = setup(keyedB('HARU_SECRET_UPSTREAM_KEY'));
    await env.run(acts.probeModels, input);
    expect(host.servingCalls).toEqual([
      { url: 'http://vllm-b/v1/chat/completions', authorization: 'Bearer upstream-key-1' },
    ]);
  });

  it('fails non-retryably when the servingUrl does not answer although the host does, routing untouched', async () => {
    const { host, acts, env, store } = setup();
    host.serving = 'refused';
    const failure = await failureOf(env.run(acts.probeModels, input));
    expect(failure).toMatchObject({ type: FailureType.ProbeFailed, nonRetryable: true });
    expect(failure.message).toMatch(
      /^model llama answers on its host but not through its servingUrl \S+ \(where the proxy sends its clients\): POST \S+ failed: .*ECONNREFUSED/,
    );
    expect(store.slotMoves).toEqual([]);
  });

  it('a 401 through the servingUrl is Unauthorized, naming upstreamAuth; an unreadable token is InvalidTarget', async () => {
    const { host, acts, env } = setup();
    host.serving = { status: 401, body: { error: 'Unauthorized' } };
    const failure = await failureOf(env.run(acts.probeModels, input));
    expect(failure).toMatchObject({ type: FailureType.Unauthorized, nonRetryable: true });
    expect(failure.message).toMatch(/HTTP 401: .*set upstreamAuth on the model in the layout$/);

    const unsetKey = setup(keyedB('HARU_SECRET_UNSET'));
    const unset = await failureOf(unsetKey.env.run(unsetKey.acts.probeModels, input));
    expect(unset).toMatchObject({ type: FailureType.InvalidTarget, nonRetryable: true });
    expect(unset.message).toMatch(/upstreamAuth names HARU_SECRET_UNSET, which is not set$/);
  });

  it('refuses an upstreamAuth outside the allow-list (a layout stored before the check) without reading or sending it', async () => {
    const { host, acts, env } = setup(keyedB('HARU_API_TOKEN'));
    const refused = await failureOf(env.run(acts.probeModels, input));
    expect(refused).toMatchObject({ type: FailureType.InvalidTarget, nonRetryable: true });
    expect(refused.message).toMatch(/upstreamAuth HARU_API_TOKEN must start with HARU_SECRET_/);
    expect(host.servingCalls).toEqual([]);
  });

  it('asks through the servingUrl while the host answers, and reports the host failure first when both fail', async () => {
    const { host, acts, env } = setup();
    host.probeResults = [{ model: 'llama', ok: false, latencyMs: 3, error: 'empty completion' }];
    host.serving = 'refused';
    const failure = await failureOf(env.run(acts.probeModels, input));
    expect(failure).toMatchObject({ type: FailureType.ProbeFailed, nonRetryable: true });
    expect(failure.message).toBe('model llama failed its probe: empty completion');
    // Sent before the host's answer was judged: the two probes run at once.
    expect(host.servingCalls).toEqual([{ url: 'http://vllm-b/v1/chat/completions', authorization: null }]);
  });

  it('fails a servingUrl that answers empty content', async () => {
    const { host, acts, env } = setup();
    host.serving = { status: 200, body: { choices: [{ message: { content: ' ' } }] } };
    const failure = await failureOf(env.run(acts.probeModels, input));
    expect(failure).toMatchObject({ type: FailureType.ProbeFailed, nonRetryable: true });
    expect(failure.message).toMatch(/: empty content$/);
  });

  type Probed = Awaited<ReturnType<ReturnType<typeof setup>['acts']['probeModels']>>;
  const withFingerprint = (store: ReturnType<typeof setup>['store']) =>
    store.slots.setWakeFingerprints(IDS.bInference, {
      llama: { prompt: 'p', text: ' ready', tokens: [' ready'], tokenLogprobs: [-0.1], takenAt: 'then' },
    });

  it('passes a woken model that scores its stored answer as before, reporting the match', async () => {
    const { host, acts, env, store } = setup();
    await withFingerprint(store);
    const result = (await env.run(acts.probeModels, input)) as Probed;
    expect(result.results[0]!.fingerprint).toMatchObject({ verdict: 'matched', storedScore: -0.1, wokenScore: -0.1 });
    expect(host.calls).toEqual(expect.arrayContaining(['scoreFingerprint', 'fingerprint']));
  });

  it('fails non-retryably with both scores when the stored answer scores outside the tolerance', async () => {
    const { host, acts, env, store } = setup();
    await withFingerprint(store);
    host.answerLogprob = -7;
    const failure = await failureOf(env.run(acts.probeModels, input));
    expect(failure).toMatchObject({ type: FailureType.ProbeFailed, nonRetryable: true });
    expect(failure.message).toMatch(/wake fidelity check failed: llama: .*stored -0\.100, woken -7\.000/);
    expect(store.slotMoves).toEqual([]);
  });

  it('stores the server pid with the fingerprint and skips the score check once the server restarted', async () => {
    const { host, acts, env, store } = setup();
    await store.slots.setWakeFingerprints(IDS.bInference, {
      llama: {
        prompt: 'p',
        text: ' ready',
        tokens: [' ready'],
        tokenLogprobs: [-0.1],
        takenAt: 'then',
        serverPid: 6999,
      },
    });
    host.answerLogprob = -7;
    const result = (await env.run(acts.probeModels, input)) as Probed;
    expect(result.results[0]!.fingerprint).toMatchObject({ verdict: 'none' });
    expect(result.results[0]!.fingerprint!.note).toMatch(/pid 6999, now 7000/);
  });

  it('only reports a score outside the tolerance under warn, and a different text with a matching score', async () => {
    const { host, acts, env, store } = setup();
    await withFingerprint(store);
    host.answerLogprob = -7;
    const warned = (await env.run(acts.probeModels, {
      ...input,
      fingerprint: { mode: 'warn' as const, toleranceNats: 0.5, maxTokens: 4 },
    })) as Probed;
    expect(warned.results[0]!.fingerprint?.verdict).toBe('score-outside');
    host.answerLogprob = -0.1;
    host.greedyText = ' steady';
    const differs = (await env.run(acts.probeModels, input)) as Probed;
    expect(differs.results[0]!.fingerprint?.verdict).toBe('text-differs');
  });

  it('fails non-retryably naming the model that answered empty', async () => {
    const { host, acts, env } = setup();
    host.probeResults = [{ model: 'llama', ok: false, latencyMs: 3, error: 'empty completion' }];
    const failure = await failureOf(env.run(acts.probeModels, input));
    expect(failure).toMatchObject({ type: FailureType.ProbeFailed, nonRetryable: true });
    expect(failure.message).toBe('model llama failed its probe: empty completion');
  });

  it('fails a 401 from vLLM as a non-retryable configuration error (Unauthorized)', async () => {
    const { host, acts, env } = setup();
    host.probeResults = [{ model: 'llama', ok: false, latencyMs: 3, error: 'HTTP 401: vLLM refused the request' }];
    const failure = await failureOf(env.run(acts.probeModels, input));
    expect(failure).toMatchObject({ type: FailureType.Unauthorized, nonRetryable: true });
  });

  it('fails when a layout model is missing from the answer', async () => {
    const { host, acts, env } = setup();
    host.probeResults = [];
    expect((await failureOf(env.run(acts.probeModels, input))).message).toBe('model llama was not probed');
  });
});

describe('sleepModels', () => {
  it('sleeps each inference slot at its level and waits until every model is asleep', async () => {
    const { host, acts, env, store } = setup();
    host.models[0]!.state = 'awake';
    expect(await env.run(acts.sleepModels, { fleetId: IDS.fleet, domainId: IDS.b })).toEqual({
      attempt: 1,
      models: ['llama'],
    });
    expect(host.calls).toContain('sleep:0:1');
    expect(host.sleepModes).toEqual(['wait']); // nothing in flight: a request slipping in finishes
    expect(store.slotMoves).toEqual([]); // b's slot was already sleeping
  });

  it('sleeps with abort when the drain left requests in flight (its budget bounds the wait)', async () => {
    const { host, acts, env } = setup();
    host.models[0] = { name: 'llama', gpuIndex: 0, state: 'awake', runningRequests: 0, waitingRequests: 2 };
    await env.run(acts.sleepModels, { fleetId: IDS.fleet, domainId: IDS.b });
    expect(host.sleepModes).toEqual(['abort']);
  });

  it('fingerprints the awake models on the slot before sleeping them when asked', async () => {
    const { host, acts, env, store } = setup();
    host.models[0]!.state = 'awake';
    await env.run(acts.sleepModels, {
      fleetId: IDS.fleet,
      domainId: IDS.b,
      fingerprint: { maxTokens: 4, timeoutMs: 1_000 },
    });
    expect(host.calls.indexOf('fingerprint')).toBeLessThan(host.calls.indexOf('sleep:0:1'));
    const [slot] = await store.slots.listByDomain(IDS.b);
    expect(slot).toMatchObject({
      wakeFingerprints: { llama: { text: ' ready', tokens: [' ready'], tokenLogprobs: [-0.1] } },
    });
  });

  it('keeps the fingerprint of a model already asleep (a repeated attempt) and takes none without the option', async () => {
    const { host, acts, env, store } = setup();
    await store.slots.setWakeFingerprints(IDS.bInference, {
      llama: { prompt: 'p', text: ' kept', tokens: [' kept'], tokenLogprobs: [-0.2], takenAt: 'then' },
    });
    await env.run(acts.sleepModels, {
      fleetId: IDS.fleet,
      domainId: IDS.b,
      fingerprint: { maxTokens: 4, timeoutMs: 1_000 },
    });
    host.models[0]!.state = 'awake';
    await env.run(acts.sleepModels, { fleetId: IDS.fleet, domainId: IDS.b });
    expect(host.calls).not.toContain('fingerprint');
    const [slot] = await store.slots.listByDomain(IDS.b);
    expect(slot).toMatchObject({ wakeFingerprints: { llama: { text: ' kept' } } });
  });

  it('refuses to sleep the active domain (non-retryable InvalidTarget), touching nothing', async () => {
    const { host, acts, env } = setup();
    const failure = await failureOf(env.run(acts.sleepModels, { fleetId: IDS.fleet, domainId: IDS.a }));
    expect(failure).toMatchObject({ type: FailureType.InvalidTarget, nonRetryable: true });
    expect(host.calls).toEqual([]);
  });
});

describe('startTraining', () => {
  it('starts every training slot and proves each run is still up after the settle', async () => {
    const { host, acts, env, store } = setup();
    host.training[0] = { gpuIndex: 0, state: 'idle', pids: [], startedAt: null, lastExit: null };
    expect(await env.run(acts.startTraining, { domainId: IDS.b })).toEqual({
      attempt: 1,
      runs: [{ gpuIndex: 0, pids: [5000] }],
    });
    expect(host.calls).toContain('startTraining:0');
    expect(store.slotMoves).toEqual([]); // already training in the store
  });

  it('throws retryable NotYet when a run dies during the settle', async () => {
    const { host, acts, env } = setup();
    host.training[0] = { gpuIndex: 0, state: 'idle', pids: [], startedAt: null, lastExit: null };
    host.onStatus = (h, reads) => reads === 2 && h.exitTraining(0, 1);
    const failure = await failureOf(env.run(acts.startTraining, { domainId: IDS.b }));
    expect(failure).toMatchObject({ type: FailureType.NotYet, nonRetryable: false });
    expect(failure.message).toBe('training on GPU 0 did not stay up (exit code 1, signal null)');
  });

  it('retries (NotYet) while a run is still stopping', async () => {
    const { host, acts, env } = setup();
    host.client.startTraining = async () => ({
      accepted: false,
      gpuIndexes: [0],
      errors: [{ target: 'gpu0', message: 'still stopping' }],
    });
    expect((await failureOf(env.run(acts.startTraining, { domainId: IDS.b }))).type).toBe(FailureType.NotYet);
  });
});

describe('drainDomain', () => {
  it('returns drained once no model has running requests', async () => {
    const { host, acts, env } = setup();
    host.models[0] = { name: 'llama', gpuIndex: 0, state: 'awake', runningRequests: 3 };
    host.onStatus = (h, reads) => reads === 3 && (h.models[0]!.runningRequests = 0);
    expect(await env.run(acts.drainDomain, { domainId: IDS.a, timeoutMs: 60_000 })).toEqual({
      attempt: 1,
      drained: true,
      runningRequests: 0,
      waitingRequests: 0,
      inFlight: [],
    });
  });

  it('waits for waiting requests too, not only running ones', async () => {
    const { host, acts, env, heartbeats } = setup();
    host.models[0] = { name: 'llama', gpuIndex: 0, state: 'awake', runningRequests: 0, waitingRequests: 4 };
    host.onStatus = (h, reads) => reads === 3 && (h.models[0]!.waitingRequests = 0);
    const result = await (env.run(acts.drainDomain, { domainId: IDS.a, timeoutMs: 60_000 }) as ReturnType<
      typeof acts.drainDomain
    >);
    expect(result.drained).toBe(true);
    expect(heartbeats[0]).toEqual({ waitingFor: 'requests in flight: llama: 0 running, 4 waiting' });
  });

  it('gives up waiting at the drain budget and reports what was still running and waiting, per model', async () => {
    const { host, acts } = setup();
    host.models[0] = { name: 'llama', gpuIndex: 0, state: 'awake', runningRequests: 2, waitingRequests: 5 };
    const late = quietEnvironment({ attempt: 1, scheduledTimestampMs: Date.now() - 10_000 });
    const result = await late.run(acts.drainDomain, { domainId: IDS.a, timeoutMs: 5_000 });
    expect(result).toEqual({
      attempt: 1,
      drained: false,
      runningRequests: 2,
      waitingRequests: 5,
      inFlight: [{ model: 'llama', running: 2, waiting: 5 }],
    });
    expect(stepMessages.drainDomain(result as Parameters<typeof stepMessages.drainDomain>[0])).toBe(
      'drain budget spent with 2 requests running and 5 waiting (llama: 2 running, 5 waiting)',
    );
  });

  it('counts a model with an unknown request count as busy', async () => {
    const { host, acts, env, heartbeats } = setup();
    host.models[0] = { name: 'llama', gpuIndex: 0, state: 'awake', runningRequests: null };
    host.onStatus = (h, reads) => reads === 3 && (h.models[0]!.runningRequests = 0);
    const result = await (env.run(acts.drainDomain, { domainId: IDS.a, timeoutMs: 60_000 }) as ReturnType<
      typeof acts.drainDomain
    >);
    expect(result.drained).toBe(true);
    expect(heartbeats[0]).toEqual({ waitingFor: 'requests in flight: llama: unknown' });
  });
});

it('refuses an unknown domain before calling any supervisor', async () => {
  const { host, acts, env } = setup();
  const failure = await failureOf(env.run(acts.wakeModels, { domainId: '10000000-0000-4000-8000-00000000dead' }));
  expect(failure.type).toBe(FailureType.InvalidTarget);
  expect(host.calls).toEqual([]);
});
