/**
 * MIG instances named by a slot, read through the fake nvidia-smi (sim/bin/nvidia-smi), which behaves as NVML
 * does under MIG: a whole GPU's memory for privileged callers only, each instance's own memory for anyone.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { ConfigError } from '../../schemas/env';
import { setHolding, type SimMig, updateInventory, writeInventory } from '../../sim/gpu-state';
import { createExecFileTool } from './exec';
import { findMigInstance, parseNvidiaList, parseNvidiaMigXml } from './mig';
import { createNvidiaReader, type MigSlot } from './nvidia';

const SMI = path.resolve(__dirname, '../../sim/bin/nvidia-smi');
const GPU0 = 'GPU-5c4b2f3e-6a7d-4c1e-9f0a-1b2c3d4e5f60';
const GPU1 = 'GPU-0f9e8d7c-6b5a-4321-8fed-cba987654321';
const MIG_A = 'MIG-c6d4f1ef-42e4-5de3-91c7-45d71c87eb3f';
const MIG_B = 'MIG-cba663e8-9bed-5b0d-a3ff-6f9a3a9c56ba';
const instances: SimMig['instances'] = [
  { gpuIndex: 0, gi: 1, ci: 0, uuid: MIG_A, profile: '3g.40gb', totalMiB: 40_192 },
  { gpuIndex: 0, gi: 2, ci: 0, uuid: MIG_B, profile: '3g.40gb', totalMiB: 40_192 },
];
let dir: string;

const reader = (mig: MigSlot[]) =>
  createNvidiaReader({
    exec: createExecFileTool({ env: { ...process.env, HARU_SIM_GPU_STATE: dir } }),
    binary: SMI,
    timeoutMs: 10_000,
    mig,
  });

beforeEach(() => {
  dir = mkdtempSync(path.join(os.tmpdir(), 'haru-mig-'));
  writeInventory(dir, {
    gpus: [
      { index: 0, uuid: GPU0, name: 'NVIDIA H100 80GB HBM3', totalMiB: 81_559 },
      { index: 1, uuid: GPU1, name: 'NVIDIA H100 80GB HBM3', totalMiB: 81_559 },
    ],
    mig: { privileged: false, instances },
    baselineMiB: 4,
    fault: null,
  });
  setHolding(dir, { pid: process.pid, gpuIndex: 0, usedMiB: 20_000, migUuid: MIG_B });
});
afterEach(() => rmSync(dir, { recursive: true, force: true }));

describe('MIG instances', () => {
  it.each([
    ['its MIG UUID', MIG_B],
    ['its GPU UUID with GI and CI', `MIG-${GPU0}/2/0`],
  ])(
    'reads the slot instance named by %s, unprivileged, where the GPU prints [Insufficient Permissions]',
    async (_how, device) => {
      const gpus = await reader([{ gpuIndex: 0, device, field: 'training[0].mig' }]).read();
      expect(gpus[0]).toEqual({
        index: 0,
        uuid: GPU0,
        usedMiB: 20_004,
        totalMiB: 40_192,
        processes: [], // unprivileged: NVML lists no process of a MIG GPU
        source: 'mig',
        migDevice: device,
        error: null,
      });
      expect(gpus[1]).toMatchObject({ index: 1, source: 'device', usedMiB: 4, totalMiB: 81_559 });
    },
  );

  it('reports a MIG GPU without a slot instance as a permission error, and the aggregate when privileged', async () => {
    const [unprivileged] = await reader([]).read();
    expect(unprivileged).toMatchObject({ usedMiB: null, error: { kind: 'permission' } });
    updateInventory(dir, { mig: { privileged: true, instances } });
    const [privileged] = await reader([]).read();
    expect(privileged).toMatchObject({
      usedMiB: 20_004,
      totalMiB: 81_559,
      source: 'device',
      processes: [{ pid: process.pid, usedMiB: 20_000 }],
    });
  });

  it('reports a lost GPU as lost even when its slot names an instance', async () => {
    updateInventory(dir, { lost: [0] });
    const [lost, other] = await reader([{ gpuIndex: 0, device: MIG_A, field: 'training[0].mig' }]).read();
    expect(lost!.error).toMatchObject({ kind: 'lost', message: expect.stringContaining('[GPU is lost]') });
    expect(other).toMatchObject({ error: null, usedMiB: 4 });
  });

  it('refuses at start a MIG device the host does not have, or one on another GPU, naming the field', async () => {
    await expect(reader([{ gpuIndex: 0, device: MIG_A, field: 'training[0].mig' }]).checkConfig()).resolves.toBe(
      undefined,
    );
    const missing = 'MIG-00000000-0000-4000-8000-000000000000';
    const error = await reader([
      { gpuIndex: 0, device: missing, field: 'training[0].mig' },
      { gpuIndex: 1, device: MIG_B, field: 'training[1].mig' },
    ])
      .checkConfig()
      .catch((e: unknown) => e);
    expect(error).toBeInstanceOf(ConfigError);
    expect((error as Error).message).toContain(`training[0].mig: ${missing} is not a MIG device of this host`);
    expect((error as Error).message).toContain(`training[1].mig: ${MIG_B} is on GPU 0, not GPU 1`);
  });

  it('parses nvidia-smi -L and -q -x as the real tool prints them', () => {
    const listed = parseNvidiaList(
      `GPU 0: NVIDIA A100-SXM4-40GB (UUID: ${GPU0})\n  MIG 1g.5gb      Device  0: (UUID: ${MIG_A})\n  MIG 1g.5gb      Device  1: (UUID: ${MIG_B})\nGPU 1: NVIDIA A100-SXM4-40GB (UUID: ${GPU1})\n`,
    );
    expect(listed).toEqual([
      {
        index: 0,
        uuid: GPU0,
        migs: [
          { index: 0, uuid: MIG_A },
          { index: 1, uuid: MIG_B },
        ],
      },
      { index: 1, uuid: GPU1, migs: [] },
    ]);
    const xml = `<?xml version="1.0" ?>\n<nvidia_smi_log>\n<gpu id="00000000:07:00.0">\n<mig_mode><current_mig>Enabled</current_mig></mig_mode>\n<mig_devices>\n<mig_device>\n<index>1</index>\n<gpu_instance_id>10</gpu_instance_id>\n<compute_instance_id>0</compute_instance_id>\n<fb_memory_usage>\n<total>4864 MiB</total>\n<used>0 MiB</used>\n<free>4860 MiB</free>\n</fb_memory_usage>\n</mig_device>\n</mig_devices>\n<uuid>${GPU0}</uuid>\n<fb_memory_usage>\n<total>Insufficient Permissions</total>\n<used>Insufficient Permissions</used>\n</fb_memory_usage>\n</gpu>\n</nvidia_smi_log>\n`;
    const parsed = parseNvidiaMigXml(xml);
    expect(parsed).toEqual([{ gpuIndex: 0, gpuUuid: GPU0, index: 1, gi: 10, ci: 0, usedMiB: 0, totalMiB: 4864 }]);
    expect(findMigInstance(MIG_B, 0, listed, parsed)).toEqual(parsed[0]);
    expect(findMigInstance(`MIG-${GPU0}/10/0`, 0, listed, parsed)).toEqual(parsed[0]);
    expect(() => parseNvidiaMigXml('Failed to initialize NVML: Driver/library version mismatch')).toThrow(
      /printed no nvidia_smi_log/,
    );
  });
});
