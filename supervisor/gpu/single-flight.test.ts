/**
 * A hung nvidia-smi (the fake's `hang` fault: it does not finish even when killed) must not pile up reads.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { updateInventory, writeInventory } from '../../sim/gpu-state';
import { waitFor } from '../../test/supervisor/support';
import { createExecFileTool, createGpuReader, type Exec, type GpuReading, GpuQueryError } from '.';
import { singleFlight } from './single-flight';

const SMI = path.resolve(__dirname, '../../sim/bin/nvidia-smi');
let dir: string;

beforeEach(() => {
  dir = mkdtempSync(path.join(os.tmpdir(), 'haru-hang-'));
  writeInventory(dir, {
    gpus: [{ index: 0, uuid: 'GPU-0', name: 'NVIDIA H100 80GB HBM3', totalMiB: 81_559 }],
    mig: null,
    baselineMiB: 4,
    fault: 'hang',
  });
});
afterEach(() => {
  updateInventory(dir, { fault: null }); // lets a stuck fake go
  rmSync(dir, { recursive: true, force: true });
});

describe('a hung GPU tool', () => {
  it('runs one read at a time, gives up on it with a clear error, and starts no other until it finishes', async () => {
    const real = createExecFileTool({ env: { ...process.env, HARU_SIM_GPU_STATE: dir } });
    let started = 0;
    const exec: Exec = async (file, args, o) => {
      started += 1;
      return real(file, args, o);
    };
    const reader = createGpuReader({ vendor: 'nvidia', exec, binary: SMI, timeoutMs: 2_000 });

    const first = reader.read();
    const second = reader.read(); // joins the read in flight
    expect(started).toBe(2); // one read = the per-GPU and the per-process query
    const [a, b] = await Promise.allSettled([first, second]);
    expect(a).toEqual({ status: 'rejected', reason: expect.any(GpuQueryError) });
    expect((a as PromiseRejectedResult).reason.message).toMatch(/did not answer within 2000 ms and was killed/);
    expect(b).toEqual(a);

    const again = await reader.read().catch((e: unknown) => e);
    expect(again).toBeInstanceOf(GpuQueryError);
    expect((again as Error).message).toMatch(
      /not started: an earlier .*nvidia-smi \(pid \d+\) has not finished \d+ s after its SIGKILL \(hung in the driver/,
    );
    expect(started).toBe(4); // both queries asked, and refused before spawning anything

    updateInventory(dir, { fault: null }); // the driver recovers: the stuck tool finishes
    const read = await waitFor('a read once the tool finished', () => reader.read().catch(() => null));
    expect(read!.gpus).toEqual([expect.objectContaining({ index: 0, usedMiB: 4 })]);
  });
});

describe('a reading reused under maxAgeMs', () => {
  const gpu = (usedMiB: number): GpuReading[] => [
    { index: 0, uuid: 'GPU-0', usedMiB, totalMiB: 100, processes: [], source: 'device', migDevice: null, error: null },
  ];

  it('is the last reading while it is at most maxAgeMs old on the clock, and a new run after', async () => {
    let now = 1_000;
    let runs = 0;
    const reader = singleFlight(
      { vendor: 'nvidia', checkConfig: async () => undefined, read: async () => gpu(++runs) },
      () => now,
    );
    expect(await reader.read({ maxAgeMs: 500 })).toEqual({ gpus: gpu(1), ageMs: 0 }); // nothing to reuse yet
    now += 400;
    expect(await reader.read({ maxAgeMs: 500 })).toEqual({ gpus: gpu(1), ageMs: 400 });
    expect(await reader.read()).toEqual({ gpus: gpu(2), ageMs: 0 }); // no maxAgeMs: always a run
    now += 501;
    expect(await reader.read({ maxAgeMs: 500 })).toEqual({ gpus: gpu(3), ageMs: 0 });
    expect(runs).toBe(3);
  });

  it('answers a run that fails with its error, and keeps the last good reading with its age', async () => {
    let fail = false;
    const reader = singleFlight({
      vendor: 'nvidia',
      checkConfig: async () => undefined,
      read: async () => {
        if (fail) throw new GpuQueryError('nvidia-smi', 'exited with code 15');
        return gpu(1);
      },
    });
    await reader.read();
    fail = true;
    await expect(reader.read()).rejects.toThrow(GpuQueryError);
    // The reading before the failure keeps its age: under maxAgeMs it may be reused, as it was before the failure.
    expect((await reader.read({ maxAgeMs: 60_000 })).gpus).toEqual(gpu(1));
  });
});

describe('a reading started since a moment (startedSinceMs)', () => {
  const gpu = (usedMiB: number): GpuReading[] => [
    { index: 0, uuid: 'GPU-0', usedMiB, totalMiB: 100, processes: [], source: 'device', migDevice: null, error: null },
  ];

  it('is the last reading or the one in flight when it started at or after that time, else a run started after', async () => {
    let now = 1_000; // one clock for both here: the monotonic (ages) and the wall clock (start times)
    let runs = 0;
    const pending: (() => void)[] = [];
    const reader = singleFlight(
      {
        vendor: 'nvidia',
        checkConfig: async () => undefined,
        read: () => {
          const n = ++runs;
          return new Promise<GpuReading[]>((resolve) => pending.push(() => resolve(gpu(n))));
        },
      },
      () => now,
      () => now,
    );
    const finish = () => pending.shift()!();

    // A run starts at 1000 (a trainer just ended at 1000); a caller at 1030 asks for one since 1000: it joins it.
    const kicked = reader.read();
    now += 30;
    const joined = reader.read({ startedSinceMs: 1_000 });
    finish();
    expect(await kicked).toEqual({ gpus: gpu(1), ageMs: 0 });
    expect(await joined).toEqual({ gpus: gpu(1), ageMs: 0 });
    expect(runs).toBe(1);

    // Finished at 1030: still the answer for a time at or before its start, with its age.
    now += 20;
    expect(await reader.read({ startedSinceMs: 1_000 })).toEqual({ gpus: gpu(1), ageMs: 20 });

    // A time after its start: a new run, never the older reading.
    const fresh = reader.read({ startedSinceMs: 1_001 });
    finish();
    expect(await fresh).toEqual({ gpus: gpu(2), ageMs: 0 });

    // A run in flight that began before the time is waited out, then a run is made after it.
    const early = reader.read();
    now += 100;
    const later = reader.read({ startedSinceMs: now - 10 });
    finish();
    await early;
    await new Promise((resolve) => setImmediate(resolve));
    finish();
    expect(await later).toEqual({ gpus: gpu(4), ageMs: 0 });
    expect(runs).toBe(4);
  });
});
