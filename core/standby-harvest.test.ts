import { standbyGpuSeconds, standbySample } from './standby-harvest';

const run = (gpuIndex: number, state: 'running' | 'idle' | 'stopping') => ({
  gpuIndex,
  state,
  pids: [],
  startedAt: null,
  lastExit: null,
});

it('reads a running run as training and anything else as idle, per training GPU', () => {
  const sample = standbySample({ training: [run(0, 'running'), run(1, 'idle'), run(2, 'stopping')] }, 1_000);
  expect(sample).toEqual({
    atMs: 1_000,
    gpus: [
      { gpuIndex: 0, use: 'training' },
      { gpuIndex: 1, use: 'idle' },
      { gpuIndex: 2, use: 'idle' },
    ],
  });
  expect(standbySample({ training: [] }, 0).gpus).toEqual([]);
});

it('counts the time between two polls per GPU, by what the earlier poll saw', () => {
  const earlier = standbySample({ training: [run(0, 'running'), run(1, 'idle')] }, 10_000);
  const later = standbySample({ training: [run(0, 'idle'), run(1, 'idle')] }, 10_500);
  expect(standbyGpuSeconds(earlier, later, 5_000)).toEqual({ training: 0.5, idle: 0.5 });
  // Two GPUs training for 2 s: 4 GPU-seconds.
  const both = standbySample({ training: [run(0, 'running'), run(1, 'running')] }, 0);
  expect(standbyGpuSeconds(both, { ...both, atMs: 2_000 }, 5_000)).toEqual({ training: 4, idle: 0 });
});

it('counts nothing over a gap longer than the limit, or none at all', () => {
  const earlier = standbySample({ training: [run(0, 'running')] }, 10_000);
  expect(standbyGpuSeconds(earlier, { ...earlier, atMs: 15_001 }, 5_000)).toEqual({ training: 0, idle: 0 });
  expect(standbyGpuSeconds(earlier, { ...earlier, atMs: 15_000 }, 5_000)).toEqual({ training: 5, idle: 0 });
  expect(standbyGpuSeconds(earlier, earlier, 5_000)).toEqual({ training: 0, idle: 0 });
  expect(standbyGpuSeconds(earlier, { ...earlier, atMs: 9_000 }, 5_000)).toEqual({ training: 0, idle: 0 });
});
