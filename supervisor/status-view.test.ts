import type { ConfiguredModel } from './inference';
import type { ListenerTable } from './listeners';
import { parsePrometheusText } from './prometheus-text';
import { createStatusView } from './status-view';
import type { VllmClient } from './vllm';

/** The background refresh, on fake timers: vLLM's reads counted, answered at once. */
describe('the status view refreshing in the background', () => {
  beforeEach(() => jest.useFakeTimers({ now: 1_000_000 }));
  afterEach(() => jest.useRealTimers());

  function view(minReadIntervalMs?: number) {
    const reads: string[] = [];
    const vllm = {
      isSleeping: async () => (reads.push('is_sleeping'), true),
      metrics: async () => (reads.push('metrics'), []),
      health: async () => void reads.push('health'),
    } as unknown as VllmClient;
    const listeners: ListenerTable = { canSeeProcesses: false, servingPids: () => [], stoppedOf: () => [] };
    const models: ConfiguredModel[] = [{ name: 'm', port: 8001, gpuIndex: 0, sleepLevel: 1 }];
    const statusView = createStatusView({
      models,
      vllm,
      listeners,
      now: () => new Date(),
      slowMs: 1_000,
      minReadIntervalMs,
    });
    return { statusView, sleepingReads: () => reads.filter((r) => r === 'is_sleeping').length };
  }

  it('reads vLLM once per period while nobody asks for the status', async () => {
    const { statusView, sleepingReads } = view();
    statusView.start(1_000);
    await jest.advanceTimersByTimeAsync(5_000);
    statusView.stop();
    expect(sleepingReads()).toBe(1 + 5); // the first read at start, then one per tick
  });

  it('leaves the reading to status requests that come more often than its period', async () => {
    const { statusView, sleepingReads } = view();
    statusView.start(1_000);
    for (let i = 0; i < 10; i += 1) {
      await jest.advanceTimersByTimeAsync(500);
      await statusView.snapshot(0);
    }
    statusView.stop();
    expect(sleepingReads()).toBe(1 + 10); // start, then one per request: no tick read beside them
  });

  it('reads vLLM at most once per minReadIntervalMs however often the status is asked for', async () => {
    const { statusView, sleepingReads } = view(2_000);
    for (let i = 0; i < 10; i += 1) {
      await statusView.snapshot(0);
      await jest.advanceTimersByTimeAsync(500);
    }
    expect(sleepingReads()).toBe(3); // at 0, 2 and 4 s of the 5 s asked every 500 ms
  });
});

/** The synthetic completion of an idle engine, on fake timers: sent only to an awake model nobody is acting on. */
describe('the status view probing an idle engine', () => {
  beforeEach(() => jest.useFakeTimers({ now: 1_000_000 }));
  afterEach(() => jest.useRealTimers());

  function view(sleeping: boolean, answer: () => Promise<{ status: number; body: unknown }>) {
    const completions: number[] = [];
    const vllm = {
      isSleeping: async () => sleeping,
      metrics: async () => parsePrometheusText('vllm:num_requests_running 0\nvllm:generation_tokens_total 7\n'),
      health: async () => undefined,
      completion: async () => (completions.push(Date.now()), answer()),
    } as unknown as VllmClient;
    const listeners: ListenerTable = { canSeeProcesses: false, servingPids: () => [], stoppedOf: () => [] };
    const models: ConfiguredModel[] = [{ name: 'm', port: 8001, gpuIndex: 0, sleepLevel: 1 }];
    const statusView = createStatusView({ models, vllm, listeners, now: () => new Date(), slowMs: 1_000 });
    return { statusView, completions };
  }
  const ok = async () => ({ status: 200, body: {} });

  it('sends an awake idle engine one completion every 5 s by default, and never a sleeping one', async () => {
    const awake = view(false, ok);
    const asleep = view(true, ok);
    awake.statusView.start(1_000);
    asleep.statusView.start(1_000);
    await jest.advanceTimersByTimeAsync(30_000);
    awake.statusView.stop();
    asleep.statusView.stop();
    expect(awake.completions.length).toBeGreaterThanOrEqual(5);
    expect(awake.completions.length).toBeLessThanOrEqual(6);
    expect(asleep.completions).toEqual([]);
    expect((await asleep.statusView.snapshot(0))[0]!.condition).toBe('ready');
  });

  it('neither probes nor judges during a sleep or wake on the GPU, and drops a completion that spanned one', async () => {
    // Every completion answers 500 after 3 s.
    const error = () =>
      new Promise<{ status: number; body: unknown }>((r) => setTimeout(() => r({ status: 500, body: {} }), 3_000));
    const { statusView, completions } = view(false, error);
    statusView.start(1_000);
    await jest.advanceTimersByTimeAsync(5_500);
    expect(completions).toHaveLength(1); // answered at 8 s
    statusView.onGpuAction(0, true);
    await jest.advanceTimersByTimeAsync(1_000);
    statusView.onGpuAction(0, false);
    await jest.advanceTimersByTimeAsync(6_000); // 12.5 s: its 500 dropped, the next one not answered yet
    expect(completions).toHaveLength(2);
    expect((await statusView.snapshot(0))[0]!.condition).toBe('ready');
    await jest.advanceTimersByTimeAsync(10_000); // the next 500 and the one sent at once after it
    expect((await statusView.snapshot(0))[0]).toMatchObject({
      condition: 'erroring',
      error: 'engine erroring: a synthetic completion answered HTTP 500 2 times in a row',
    });
    statusView.stop();
  });
});
