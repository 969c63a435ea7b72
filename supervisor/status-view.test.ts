import type { ConfiguredModel } from './inference';
import type { ListenerTable } from './listeners';
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
