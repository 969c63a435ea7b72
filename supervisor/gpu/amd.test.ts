import { createAmdReader, parseRocmMeminfo, ROCM_MEMINFO_ARGS } from './amd';
import { type Exec, GpuQueryError } from './types';

const ROCM_OUTPUT = JSON.stringify({
  card0: { 'VRAM Total Memory (B)': '68702699520', 'VRAM Total Used Memory (B)': '10960896' },
  card1: { 'VRAM Total Memory (B)': '68702699520', 'VRAM Total Used Memory (B)': '21474836480' },
  system: { 'Driver version': '6.7.0' },
});

describe('rocm-smi adapter', () => {
  it('reads used and total VRAM per card from `rocm-smi --showmeminfo vram --json`', async () => {
    const calls: string[][] = [];
    const exec: Exec = async (file, args) => {
      calls.push([file, ...args]);
      return { code: 0, signal: null, stdout: ROCM_OUTPUT, stderr: '' };
    };
    expect(await createAmdReader({ exec, timeoutMs: 1_000 }).read()).toEqual([
      {
        index: 0,
        uuid: 'card0',
        usedMiB: 10,
        totalMiB: 65520,
        processes: [],
        source: 'device',
        migDevice: null,
        error: null,
      },
      {
        index: 1,
        uuid: 'card1',
        usedMiB: 20480,
        totalMiB: 65520,
        processes: [],
        source: 'device',
        migDevice: null,
        error: null,
      },
    ]);
    expect(calls).toEqual([['rocm-smi', ...ROCM_MEMINFO_ARGS]]);
  });

  it.each([
    ['non-JSON', 'ERROR: GPU[0] : Unable to read VRAM info'],
    ['a card without figures', JSON.stringify({ card0: { 'VRAM Total Memory (B)': 'N/A' } })],
    ['no cards', JSON.stringify({ system: {} })],
  ])('refuses %s output', (_what, stdout) => {
    expect(() => parseRocmMeminfo(stdout)).toThrow(GpuQueryError);
  });

  it('turns a non-zero exit into an error', async () => {
    const exec: Exec = async () => ({ code: 2, signal: null, stdout: '', stderr: 'rocm-smi: no AMD GPUs' });
    await expect(createAmdReader({ exec, binary: 'rocm-smi', timeoutMs: 1_000 }).read()).rejects.toThrow(
      /`rocm-smi --showmeminfo vram --json` exited with code 2: rocm-smi: no AMD GPUs/,
    );
  });
});
