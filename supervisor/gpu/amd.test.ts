import { createAmdReader, parseRocmMeminfo, parseRocmPidGpus, ROCM_MEMINFO_ARGS, ROCM_PIDGPUS_ARGS } from './amd';
import { type Exec, GpuQueryError } from './types';

// The outputs below follow ROCm/rocm_smi_lib python_smi_tools/rocm_smi.py: `--json` prints JSON_DATA, cards'
// figures from showMemInfo, the compute processes as `system` entries from showPids/print2DArray (row lowercased,
// pid in the key, the rest joined with ", ": name, GPU count, VRAM bytes, SDMA, CU occupancy).
const ROCM_OUTPUT = JSON.stringify({
  card0: { 'VRAM Total Memory (B)': '68702699520', 'VRAM Total Used Memory (B)': '21485797376' },
  card1: { 'VRAM Total Memory (B)': '68702699520', 'VRAM Total Used Memory (B)': '10960896' },
  system: { PID4242: 'python3, 1, 21474836480, 0, 0' },
});
// A process on two GPUs (its VRAM is their sum), one whose name has a space, one whose VRAM is not readable.
const ROCM_SHARED = JSON.stringify({
  card0: { 'VRAM Total Memory (B)': '68702699520', 'VRAM Total Used Memory (B)': '42949672960' },
  card1: { 'VRAM Total Memory (B)': '68702699520', 'VRAM Total Used Memory (B)': '21474836480' },
  system: {
    PID101: 'pt_main_thread, 2, 53687091200, 0, 12',
    PID202: 'ray, worker, 1, 10737418240, 0, 0',
    PID303: 'python3, 1, unknown, unknown, unknown',
  },
});
// `rocm-smi --showpidgpus` prints text only (printListLog is silent in JSON mode), between its spacers.
const PIDGPUS = (body: string) =>
  [
    '============================ ROCm System Management Interface ============================',
    '================================== GPUs Indexed by PID ===================================',
    body,
    '==========================================================================================',
    '================================== End of ROCm SMI Log ===================================',
    '',
  ].join('\n');
const PIDGPUS_ONE = PIDGPUS('PID 4242 is using 1 DRM device(s):\n0 ');
const PIDGPUS_SHARED = PIDGPUS(
  'PID 101 is using 2 DRM device(s):\n0 1 \nPID 202 is using 1 DRM device(s):\n1 \nPID 303 is using 1 DRM device(s):\n0 ',
);
const PIDGPUS_NONE = PIDGPUS('No KFD PIDs currently running');

const reader = (meminfo: string, pidGpus: string) => {
  const calls: string[][] = [];
  const exec: Exec = async (file, args) => {
    calls.push([file, ...args]);
    return { code: 0, signal: null, stdout: args.includes('--json') ? meminfo : pidGpus, stderr: '' };
  };
  return { calls, gpu: createAmdReader({ exec, timeoutMs: 1_000 }) };
};
const card = (index: number, usedMiB: number, processes: { pid: number; usedMiB: number | null }[]) => ({
  index,
  uuid: `card${index}`,
  usedMiB,
  totalMiB: 65520,
  processes,
  source: 'device',
  migDevice: null,
  error: null,
});

describe('rocm-smi adapter', () => {
  it('reads each card’s VRAM and the compute processes on it, with their VRAM', async () => {
    const { calls, gpu } = reader(ROCM_OUTPUT, PIDGPUS_ONE);
    expect(await gpu.read()).toEqual([card(0, 20490, [{ pid: 4242, usedMiB: 20480 }]), card(1, 10, [])]);
    expect(calls).toEqual([
      ['rocm-smi', ...ROCM_MEMINFO_ARGS],
      ['rocm-smi', ...ROCM_PIDGPUS_ARGS],
    ]);
  });

  it('lists a process on several GPUs on each without a figure (rocm-smi sums its VRAM over them)', async () => {
    const { gpu } = reader(ROCM_SHARED, PIDGPUS_SHARED);
    expect(await gpu.read()).toEqual([
      card(0, 40960, [
        { pid: 101, usedMiB: null },
        { pid: 303, usedMiB: null },
      ]),
      card(1, 20480, [
        { pid: 101, usedMiB: null },
        { pid: 202, usedMiB: 10240 },
      ]),
    ]);
  });

  it('reads a host without compute processes', async () => {
    const meminfo = JSON.stringify({ card0: JSON.parse(ROCM_OUTPUT).card0 });
    expect(parseRocmPidGpus(PIDGPUS_NONE)).toEqual(new Map());
    expect((await reader(meminfo, PIDGPUS_NONE).gpu.read())[0]!.processes).toEqual([]);
  });

  it.each([
    ['non-JSON', 'ERROR: GPU[0] : Unable to read VRAM info'],
    ['a card without figures', JSON.stringify({ card0: { 'VRAM Total Memory (B)': 'N/A' } })],
    ['no cards', JSON.stringify({ system: {} })],
    ['a process row cut short', JSON.stringify({ ...JSON.parse(ROCM_OUTPUT), system: { PID1: 'python3, 1' } })],
  ])('refuses %s output', (_what, stdout) => {
    expect(() => parseRocmMeminfo(stdout, 'rocm-smi', new Map([[4242, [0]]]))).toThrow(GpuQueryError);
  });

  it('refuses a process --showpidgpus does not place, and a device list cut short', () => {
    expect(() => parseRocmMeminfo(ROCM_OUTPUT, 'rocm-smi', new Map())).toThrow(
      /listed pid 4242, which rocm-smi --showpidgpus does not place on a GPU/,
    );
    expect(() => parseRocmPidGpus(PIDGPUS('PID 7 is using 2 DRM device(s):\n0 '))).toThrow(
      /printed 2 devices for pid 7 but listed 1/,
    );
  });

  it('turns a non-zero exit into an error', async () => {
    const exec: Exec = async () => ({ code: 2, signal: null, stdout: '', stderr: 'rocm-smi: no AMD GPUs' });
    await expect(createAmdReader({ exec, binary: 'rocm-smi', timeoutMs: 1_000 }).read()).rejects.toThrow(
      /`rocm-smi --showmeminfo vram --showpids --json` exited with code 2: rocm-smi: no AMD GPUs/,
    );
  });
});
