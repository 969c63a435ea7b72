import { createGpuReader, execFileTool } from '.';
import {
  createNvidiaReader,
  joinNvidia,
  NVIDIA_APPS_QUERY,
  NVIDIA_GPU_QUERY,
  parseNvidiaApps,
  parseNvidiaGpus,
} from './nvidia';
import { type Exec, type ExecResult, GpuQueryError, MAX_STDERR_CHARS } from './types';

const UUID0 = 'GPU-5c4b2f3e-6a7d-4c1e-9f0a-1b2c3d4e5f60';
const UUID1 = 'GPU-0f9e8d7c-6b5a-4321-8fed-cba987654321';
const FROM_DEVICE = { source: 'device', migDevice: null, error: null };

/** An Exec answering each nvidia-smi query with a canned result (as the real tool prints it). */
function fakeExec(answers: { gpu: Partial<ExecResult>; apps: Partial<ExecResult> }): Exec & { calls: string[][] } {
  const calls: string[][] = [];
  const exec: Exec = async (file, args) => {
    calls.push([file, ...args]);
    const answer = args[0]!.startsWith('--query-gpu') ? answers.gpu : answers.apps;
    return { code: 0, signal: null, stdout: '', stderr: '', ...answer };
  };
  return Object.assign(exec, { calls });
}

describe('nvidia-smi adapter', () => {
  it('joins per-GPU and per-process CSV rows by UUID', async () => {
    const exec = fakeExec({
      gpu: { stdout: `0, ${UUID0}, 71236, 81559\n1, ${UUID1}, 4, 81559\n` },
      apps: { stdout: `4242, 20480, ${UUID0}\n4343, 50752, ${UUID0}\n` },
    });
    const reader = createNvidiaReader({ exec, binary: '/opt/bin/nvidia-smi', timeoutMs: 1_000 });
    expect(await reader.read()).toEqual([
      {
        index: 0,
        uuid: UUID0,
        usedMiB: 71236,
        totalMiB: 81559,
        processes: [
          { pid: 4242, usedMiB: 20480 },
          { pid: 4343, usedMiB: 50752 },
        ],
        ...FROM_DEVICE,
      },
      { index: 1, uuid: UUID1, usedMiB: 4, totalMiB: 81559, processes: [], ...FROM_DEVICE },
    ]);
    expect(exec.calls).toEqual([
      ['/opt/bin/nvidia-smi', ...NVIDIA_GPU_QUERY],
      ['/opt/bin/nvidia-smi', ...NVIDIA_APPS_QUERY],
    ]);
    expect(NVIDIA_GPU_QUERY).toEqual([
      '--query-gpu=index,uuid,memory.used,memory.total',
      '--format=csv,noheader,nounits',
    ]);
    expect(NVIDIA_APPS_QUERY).toEqual([
      '--query-compute-apps=pid,used_memory,gpu_uuid',
      '--format=csv,noheader,nounits',
    ]);
  });

  it.each(['[N/A]', '[Not Supported]'])('takes usage from the per-process rows where totals read %s', (hidden) => {
    const gpus = parseNvidiaGpus(`0, ${UUID0}, ${hidden}, ${hidden}\n1, ${UUID1}, ${hidden}, ${hidden}\n`);
    const apps = parseNvidiaApps(`777, 9728, ${UUID1}\n`);
    const fromProcesses = { source: 'processes', migDevice: null, error: null };
    expect(joinNvidia(gpus, apps)).toEqual([
      { index: 0, uuid: UUID0, usedMiB: 0, totalMiB: null, processes: [], ...fromProcesses },
      {
        index: 1,
        uuid: UUID1,
        usedMiB: 9728,
        totalMiB: null,
        processes: [{ pid: 777, usedMiB: 9728 }],
        ...fromProcesses,
      },
    ]);
  });

  it.each([
    ['[Insufficient Permissions]', 'permission', /MIG is on.*name the slot's MIG instance.*training\[\]\.mig/],
    ['[GPU is lost]', 'lost', /fell off the bus.*reset it \(nvidia-smi -r\) or reboot/],
    ['[Unknown Error]', 'unknown', /\[Unknown Error\].*Xid/],
    ['[Some Future Placeholder]', 'unknown', /GPU 0 \(GPU-.*\)/],
  ])('reports %s on one GPU as a %s error naming it and the fix, and still reads the others', (hidden, kind, fix) => {
    const gpus = parseNvidiaGpus(`0, ${UUID0}, ${hidden}, ${hidden}\n1, ${UUID1}, 4, 81559\n`);
    const [bad, good] = joinNvidia(gpus, parseNvidiaApps(`777, 100, ${UUID0}\n`));
    expect(bad).toMatchObject({ index: 0, usedMiB: null, totalMiB: null, error: { kind } });
    expect(bad!.error!.message).toMatch(new RegExp(`^GPU 0 \\(${UUID0}\\): `));
    expect(bad!.error!.message).toMatch(fix);
    expect(good).toMatchObject({ index: 1, usedMiB: 4, totalMiB: 81559, error: null });
  });

  it('reads a lost GPU whose whole row is [GPU is lost] as lost, not as unparseable', () => {
    const gpus = parseNvidiaGpus(`0, [GPU is lost], [GPU is lost], [GPU is lost]\n`);
    expect(joinNvidia(gpus, [])[0]!.error).toMatchObject({ kind: 'lost' });
  });

  it('accepts an empty process list (nvidia-smi prints nothing when no process uses a GPU)', () => {
    expect(parseNvidiaApps('')).toEqual([]);
    expect(parseNvidiaApps('\n')).toEqual([]);
  });

  it.each([
    ['a driver message', 'Unable to determine the device handle for GPU0000:17:00.0: Unknown Error\n'],
    ['a missing column', `0, ${UUID0}, 1024\n`],
    ['a non-number', `0, ${UUID0}, lots, 81559\n`],
    ['a header line', `index, uuid, memory.used [MiB], memory.total [MiB]\n0, ${UUID0}, 1 MiB, 81559 MiB\n`],
    ['no GPUs at all', ''],
  ])('refuses unparseable per-GPU output (%s) instead of reading it as zero', async (_what, stdout) => {
    const reader = createNvidiaReader({ exec: fakeExec({ gpu: { stdout }, apps: { stdout: '' } }), timeoutMs: 1_000 });
    const error = await reader.read().catch((e: unknown) => e);
    expect(error).toBeInstanceOf(GpuQueryError);
    expect((error as Error).message).toContain('nvidia-smi --query-gpu=index,uuid,memory.used,memory.total');
  });

  it('keeps a process whose memory is hidden as null, and refuses one on an unlisted GPU', () => {
    expect(parseNvidiaApps(`4242, [N/A], ${UUID0}\n`)).toEqual([{ pid: 4242, usedMiB: null, gpuUuid: UUID0 }]);
    const hiddenTotals = parseNvidiaGpus(`0, ${UUID0}, [N/A], [N/A]\n`);
    expect(joinNvidia(hiddenTotals, parseNvidiaApps(`4242, [N/A], ${UUID0}\n`))[0]!.error).toMatchObject({
      kind: 'unknown',
      message: expect.stringContaining("neither the GPU's totals nor the memory of pid 4242"),
    });
    const gpus = parseNvidiaGpus(`0, ${UUID0}, 100, 81559\n`);
    expect(() => joinNvidia(gpus, parseNvidiaApps(`4242, 100, ${UUID1}\n`))).toThrow(/not a listed GPU/);
  });

  it('turns a non-zero exit into an error naming the command and carrying capped output', async () => {
    const driverError =
      "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver. Make sure that the latest NVIDIA driver is installed and running.\n\n";
    const failing = createNvidiaReader({
      exec: fakeExec({ gpu: { code: 9, stdout: driverError }, apps: { code: 9, stdout: driverError } }),
      timeoutMs: 1_000,
    });
    await expect(failing.read()).rejects.toThrow(/`nvidia-smi --query-.*` exited with code 9: NVIDIA-SMI has failed/);

    const noisy = createNvidiaReader({
      exec: fakeExec({ gpu: { code: 15, stderr: 'x'.repeat(10_000) }, apps: { stdout: '' } }),
      timeoutMs: 1_000,
    });
    const error = (await noisy.read().catch((e: unknown) => e)) as GpuQueryError;
    expect(error.message.length).toBeLessThan(MAX_STDERR_CHARS + 200);
  });

  it('reports a killed (timed-out) tool and one that cannot be run', async () => {
    const killed = createNvidiaReader({
      exec: fakeExec({ gpu: { code: null, signal: 'SIGKILL' }, apps: { stdout: '' } }),
      timeoutMs: 1_000,
    });
    await expect(killed.read()).rejects.toThrow(/was killed \(SIGKILL\)/);

    const missing = createGpuReader({
      vendor: 'nvidia',
      exec: execFileTool,
      binary: '/nonexistent/nvidia-smi',
      timeoutMs: 1_000,
    });
    await expect(missing.read()).rejects.toThrow(/could not be run \(.*ENOENT/);
  });
});

describe('execFileTool', () => {
  it('resolves non-zero exits with the code and output, and kills a command that overruns its timeout', async () => {
    expect(await execFileTool('sh', ['-c', 'echo out; echo err >&2; exit 3'], { timeoutMs: 5_000 })).toEqual({
      code: 3,
      signal: null,
      stdout: 'out\n',
      stderr: 'err\n',
    });
    const slow = await execFileTool('sleep', ['30'], { timeoutMs: 100 });
    expect(slow).toMatchObject({ code: null, signal: 'SIGKILL' });
  });
});
