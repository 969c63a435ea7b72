/**
 * The fake nvidia-smi (sim/bin/nvidia-smi) prints nvidia-smi's own CSV from the simulated GPU state, and
 * releases the memory of processes that are gone.
 */
import { execFile, spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { setHolding, updateInventory, writeInventory } from './gpu-state';

const SMI = path.join(__dirname, 'bin/nvidia-smi');
const UUID0 = 'GPU-9a1b2c3d-0000-4000-8000-000000000000';
const UUID1 = 'GPU-9a1b2c3d-1111-4111-8111-111111111111';
let dir: string;

function smi(...args: string[]): Promise<{ code: number; stdout: string }> {
  return new Promise((resolve) => {
    execFile(SMI, args, { env: { ...process.env, HARU_SIM_GPU_STATE: dir } }, (err, stdout) =>
      resolve({ code: err ? Number((err as { code?: number }).code) : 0, stdout }),
    );
  });
}

beforeEach(() => {
  dir = mkdtempSync(path.join(os.tmpdir(), 'haru-smi-'));
  writeInventory(dir, {
    gpus: [
      { index: 0, uuid: UUID0, name: 'NVIDIA H100 80GB HBM3', totalMiB: 81559 },
      { index: 1, uuid: UUID1, name: 'NVIDIA H100 80GB HBM3', totalMiB: 81559 },
    ],
    mig: null,
    baselineMiB: 4,
    fault: null,
  });
  setHolding(dir, { pid: process.pid, gpuIndex: 1, usedMiB: 20500, label: 'python3' });
});
afterEach(() => rmSync(dir, { recursive: true, force: true }));

describe('fake nvidia-smi', () => {
  it('answers the per-GPU query in every csv variant, exactly as nvidia-smi prints it', async () => {
    expect(await smi('--query-gpu=index,memory.used,memory.total', '--format=csv,noheader,nounits')).toEqual({
      code: 0,
      stdout: '0, 4, 81559\n1, 20504, 81559\n',
    });
    expect((await smi('--query-gpu=index,uuid,memory.used,memory.total', '--format=csv,noheader,nounits')).stdout).toBe(
      `0, ${UUID0}, 4, 81559\n1, ${UUID1}, 20504, 81559\n`,
    );
    expect((await smi('--query-gpu=index,memory.used,memory.free', '--format=csv')).stdout).toBe(
      'index, memory.used [MiB], memory.free [MiB]\n0, 4 MiB, 81555 MiB\n1, 20504 MiB, 61055 MiB\n',
    );
    expect((await smi('--query-gpu', 'index,name', '--format', 'csv,noheader', '-i', '1')).stdout).toBe(
      '1, NVIDIA H100 80GB HBM3\n',
    );
  });

  it('answers the per-process query and prints nothing when no process holds memory', async () => {
    expect(await smi('--query-compute-apps=pid,used_memory,gpu_uuid', '--format=csv,noheader,nounits')).toEqual({
      code: 0,
      stdout: `${process.pid}, 20500, ${UUID1}\n`,
    });
    expect((await smi('--query-compute-apps=pid,process_name,used_memory', '--format=csv')).stdout).toBe(
      `pid, process_name, used_gpu_memory [MiB]\n${process.pid}, python3, 20500 MiB\n`,
    );
    setHolding(dir, { pid: process.pid, gpuIndex: 1, usedMiB: 0 });
    expect((await smi('--query-compute-apps=pid,used_memory,gpu_uuid', '--format=csv,noheader,nounits')).stdout).toBe(
      '',
    );
  });

  it('follows NVML under MIG: aggregate figures and processes only when privileged, instances always', async () => {
    const MIG0 = 'MIG-c6d4f1ef-42e4-5de3-91c7-45d71c87eb3f';
    const mig = {
      privileged: false,
      instances: [{ gpuIndex: 1, gi: 1, ci: 0, uuid: MIG0, profile: '3g.40gb', totalMiB: 40_192 }],
    };
    updateInventory(dir, { mig });
    const query = ['--query-gpu=index,memory.used,memory.total', '--format=csv,noheader,nounits'];
    expect((await smi(...query)).stdout).toBe(
      '0, 4, 81559\n1, [Insufficient Permissions], [Insufficient Permissions]\n',
    );
    const apps = ['--query-compute-apps=pid,used_memory', '--format=csv,noheader,nounits'];
    expect((await smi(...apps)).stdout).toBe('');
    expect((await smi('-L')).stdout).toBe(
      `GPU 0: NVIDIA H100 80GB HBM3 (UUID: ${UUID0})\nGPU 1: NVIDIA H100 80GB HBM3 (UUID: ${UUID1})\n  MIG 3g.40gb    Device  0: (UUID: ${MIG0})\n`,
    );
    const xml = (await smi('-q', '-x')).stdout;
    expect(xml).toMatch(/<mig_device>\s*<index>0<\/index>\s*<gpu_instance_id>1<\/gpu_instance_id>/);
    expect(xml).toMatch(/<used>20504 MiB<\/used>\s*<free>19688 MiB<\/free>/); // the instance: baseline + holder
    expect(xml).toContain('<used>Insufficient Permissions</used>'); // the GPU as a whole

    updateInventory(dir, { mig: { ...mig, privileged: true } });
    expect((await smi(...query)).stdout).toBe('0, 4, 81559\n1, 20504, 81559\n');
    expect((await smi(...apps)).stdout).toBe(`${process.pid}, 20500\n`);
  });

  it('prints [GPU is lost] for a GPU that fell off the bus and lists none of its processes', async () => {
    updateInventory(dir, { lost: [1] });
    expect((await smi('--query-gpu=index,uuid,memory.used', '--format=csv,noheader,nounits')).stdout).toBe(
      `0, ${UUID0}, 4\n1, ${UUID1}, [GPU is lost]\n`,
    );
    expect((await smi('--query-compute-apps=pid', '--format=csv,noheader')).stdout).toBe('');
  });

  it('releases the memory of a process that died without cleaning up', async () => {
    const holder = spawn(
      process.execPath,
      [
        '-e',
        `require(${JSON.stringify(path.join(__dirname, 'gpu-state.js'))}).setHolding(${JSON.stringify(dir)}, { gpuIndex: 0, usedMiB: 30000 }); console.log('held'); setInterval(() => {}, 1000);`,
      ],
      { stdio: ['ignore', 'pipe', 'inherit'] },
    );
    await new Promise<void>((resolve) => holder.stdout.once('data', () => resolve()));
    const query = ['--query-gpu=index,memory.used', '--format=csv,noheader,nounits'];
    expect((await smi(...query)).stdout).toBe('0, 30004\n1, 20504\n');
    const apps = await smi('--query-compute-apps=pid,used_memory', '--format=csv,noheader,nounits');
    expect(apps.stdout).toContain(`${holder.pid}, 30000\n`);

    const exited = new Promise((resolve) => holder.once('exit', resolve));
    holder.kill('SIGKILL');
    await exited;
    expect((await smi(...query)).stdout).toBe('0, 4\n1, 20504\n');
    expect((await smi('--query-compute-apps=pid', '--format=csv,noheader')).stdout).toBe(`${process.pid}\n`);
  });

  it('fails like nvidia-smi: driver error exit 9, unknown field exit 2, and garbage when told to', async () => {
    expect(await smi('--query-gpu=index,bogus', '--format=csv')).toEqual({
      code: 2,
      stdout: 'Field "bogus" is not a valid field to query.\n\n',
    });
    updateInventory(dir, { fault: 'fail' });
    const failed = await smi('--query-gpu=index', '--format=csv');
    expect(failed.code).toBe(9);
    expect(failed.stdout).toMatch(/^NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver/);
    updateInventory(dir, { fault: 'garbage' });
    expect(await smi('--query-gpu=index', '--format=csv')).toEqual({
      code: 0,
      stdout: 'Unable to determine the device handle for GPU0000:17:00.0: Unknown Error\n',
    });
    rmSync(dir, { recursive: true, force: true });
    expect((await smi('-L')).code).toBe(9); // no state at all: no driver
  });
});
