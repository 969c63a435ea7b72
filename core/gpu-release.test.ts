import type { GpuMemory } from '../schemas/supervisor';
import { judgeGpu } from './gpu-release';

const gpu = (fields: Partial<GpuMemory> & Pick<GpuMemory, 'usedMiB' | 'totalMiB'>): GpuMemory => ({
  index: 0,
  uuid: 'GPU-0',
  processes: [],
  source: 'device',
  migDevice: null,
  error: null,
  models: [],
  ...fields,
});

describe('judgeGpu', () => {
  it('passes a GPU whose trainer is gone and whose other memory is within the tolerance', () => {
    expect(judgeGpu(gpu({ usedMiB: 1_000, totalMiB: 80_000 }), [4242], 0.1)).toEqual({
      seen: {
        index: 0,
        usedMiB: 1_000,
        totalMiB: 80_000,
        otherMiB: 1_000,
        freeMiB: 79_000,
        wakeNeedMiB: 0,
        proof: 'device totals',
      },
      problems: [],
    });
  });

  it('names a trainer pid still holding memory and the memory held besides the vLLM servers', () => {
    const verdict = judgeGpu(
      gpu({ usedMiB: 70_000, totalMiB: 80_000, processes: [{ pid: 4242, usedMiB: 69_000 }] }),
      [4242],
      0.1,
    );
    expect(verdict.problems).toEqual([
      'GPU 0: trainer pid 4242 still holds 69000 MiB',
      'GPU 0: 70000 MiB held besides its vLLM servers (max 8000 MiB, 10% of 80000) (held by pid 4242 69000 MiB)',
    ]);
  });

  it("does not count the sleeping vLLMs' own residue, however many share the GPU", () => {
    // Three sleeping servers keep 3 GB each (CUDA context and graph pools): 11% of the GPU, all theirs.
    const models = [1, 2, 3].map((n) => ({ name: `m${n}`, pids: [100 + n], residueMiB: 3_000, wakeNeedMiB: 21_000 }));
    const verdict = judgeGpu(
      gpu({
        usedMiB: 9_004,
        totalMiB: 81_559,
        processes: models.map((m) => ({ pid: m.pids[0]!, usedMiB: 3_000 })),
        models,
      }),
      [4242],
      0.1,
    );
    expect(verdict.problems).toEqual([]);
    expect(verdict.seen).toMatchObject({ otherMiB: 4, freeMiB: 72_555, wakeNeedMiB: 63_000 });
  });

  it('refuses a GPU on which the models would not fit on wake, naming the figures and the processes', () => {
    const verdict = judgeGpu(
      gpu({
        usedMiB: 10_500,
        totalMiB: 80_000,
        processes: [
          { pid: 101, usedMiB: 3_000 },
          { pid: 7, usedMiB: 7_500 },
        ],
        models: [{ name: 'llama', pids: [101], residueMiB: 3_000, wakeNeedMiB: 72_000 }],
      }),
      [4242],
      0.1,
    );
    expect(verdict.problems).toEqual([
      'GPU 0: 69500 MiB free, the models need 72000 MiB to wake (llama 72000) (held by pid 7 7500 MiB)',
    ]);
  });

  it('checks only the trainer pids where the device reports no total, and says so', () => {
    const verdict = judgeGpu(
      gpu({ usedMiB: 50_000, totalMiB: null, processes: [{ pid: 1, usedMiB: 50_000 }], source: 'processes' }),
      [4242],
      0.1,
    );
    expect(verdict).toEqual({
      seen: {
        index: 0,
        usedMiB: 50_000,
        totalMiB: null,
        otherMiB: 50_000,
        freeMiB: null,
        wakeNeedMiB: 0,
        proof: 'per-process figures: trainer pids only (no total, wake fit not checked)',
      },
      problems: [],
    });
  });

  it.each(['permission', 'lost'] as const)('is fatal for a GPU whose memory reads as a %s error', (kind) => {
    const message = `GPU 0 (GPU-0): ${kind}: the fix`;
    const verdict = judgeGpu(gpu({ usedMiB: null, totalMiB: null, error: { kind, message } }), [4242], 0.1);
    expect(verdict).toMatchObject({ fatal: message, problems: [] });
  });

  it('keeps waiting on an unknown driver error and on a trainer pid whose memory is not reported', () => {
    const failed = gpu({
      usedMiB: null,
      totalMiB: null,
      error: { kind: 'unknown', message: 'GPU 0: [Unknown Error]' },
    });
    expect(judgeGpu(failed, [4242], 0.1).problems).toEqual(['GPU 0: [Unknown Error]']);
    expect(judgeGpu(failed, [4242], 0.1).fatal).toBeUndefined();
    const hidden = gpu({ usedMiB: 10, totalMiB: 80_000, processes: [{ pid: 4242, usedMiB: null }] });
    expect(judgeGpu(hidden, [4242], 0.1).problems).toEqual([
      'GPU 0: trainer pid 4242 still holds an unreported amount of MiB',
    ]);
  });

  it("never takes another PID namespace's pid for the trainer or a vLLM server, and counts its memory as other", () => {
    // nvidia-smi in a container prints the host's pids: host pid 4242 is not the container's trainer 4242.
    const verdict = judgeGpu(
      gpu({
        usedMiB: 12_000,
        totalMiB: 80_000,
        processes: [
          { pid: 4242, usedMiB: 9_000, foreign: true },
          { pid: 101, usedMiB: 3_000, foreign: true },
        ],
        pidSpace: 'unmapped',
        models: [{ name: 'llama', pids: [101], residueMiB: null, wakeNeedMiB: 60_000 }],
      }),
      [4242],
      0.1,
    );
    expect(verdict.problems).toEqual([
      'GPU 0: 12000 MiB held besides its vLLM servers (max 8000 MiB, 10% of 80000) (held by host pid 4242 9000 MiB, host pid 101 3000 MiB)',
    ]);
    expect(verdict.seen.proof).toBe(
      "device totals, vLLM residue not reported (counted as other); per-process pids are the host's and this supervisor cannot map them (no host /proc): trainer pids not matched, the supervisor's stop proof stands instead",
    );
  });

  it('matches the trainer by its mapped pid and says the pids were mapped', () => {
    const verdict = judgeGpu(
      gpu({
        usedMiB: 20_000,
        totalMiB: 80_000,
        processes: [
          { pid: 12, usedMiB: 19_000 },
          { pid: 90_001, usedMiB: 1_000, foreign: true },
        ],
        pidSpace: 'mapped',
      }),
      [12],
      0.1,
    );
    expect(verdict.problems[0]).toBe('GPU 0: trainer pid 12 still holds 19000 MiB');
    expect(verdict.seen.proof).toBe("device totals; pids mapped from the host's namespace (NSpid)");
  });
});
