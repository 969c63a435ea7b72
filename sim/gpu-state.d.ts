/** Types for sim/gpu-state.js (plain CommonJS so the fake nvidia-smi starts fast under plain node). */

export interface SimGpu {
  index: number;
  /** nvidia-smi style UUID: `GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx`. */
  uuid: string;
  name: string;
  totalMiB: number;
}

/**
 * How the fake nvidia-smi misbehaves: exit non-zero with a driver error, print unparseable output, or hang
 * without finishing even when killed (until the fault is cleared).
 */
export type SmiFault = null | 'fail' | 'garbage' | 'hang';

/** One MIG instance (a GPU instance with one compute instance) of a simulated GPU. */
export interface SimMigInstance {
  gpuIndex: number;
  /** GPU instance id (GI) and compute instance id (CI), as `nvidia-smi -q` prints them. */
  gi: number;
  ci: number;
  /** `MIG-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx`, as `nvidia-smi -L` prints it. */
  uuid: string;
  /** Profile name, e.g. `3g.40gb`. */
  profile: string;
  totalMiB: number;
}

/**
 * MIG mode as NVML behaves: aggregate memory and the per-process list of a MIG-enabled GPU only for a
 * privileged caller; otherwise `[Insufficient Permissions]` and no process rows, while each instance's own
 * memory stays readable in `nvidia-smi -q -x`.
 */
export interface SimMig {
  privileged: boolean;
  instances: SimMigInstance[];
}

export interface SimGpuInventory {
  gpus: SimGpu[];
  /** MIG mode of every listed GPU with an instance; null: MIG off. */
  mig: SimMig | null;
  /** GPUs that fell off the bus: their figures read `[GPU is lost]`, their processes are not listed. */
  lost?: number[];
  /** Memory the driver itself reports as used on every GPU (real idle GPUs show a few MiB). */
  baselineMiB: number;
  fault: SmiFault;
  /**
   * The host's /proc as the simulated container sees it: nvidia-smi then prints every process under its host
   * pid, as the NVIDIA driver (which knows no PID namespaces) does in a container.
   */
  hostProc?: string;
}

export interface SimGpuHolder {
  pid: number;
  gpuIndex: number;
  usedMiB: number;
  label: string;
  startTime: string | null;
  /** The MIG instance the memory is on (default: the GPU's first instance when MIG is on). */
  migUuid?: string;
}

export const INVENTORY_FILE: string;
export const HOLDERS_DIR: string;
export function writeJsonAtomic(file: string, data: unknown): void;
export function writeInventory(dir: string, inventory: SimGpuInventory): void;
export function readInventory(dir: string): SimGpuInventory;
export function updateInventory(dir: string, patch: Partial<SimGpuInventory>): void;
export function setHolding(
  dir: string,
  holding: { pid?: number; gpuIndex: number; usedMiB: number; label?: string; migUuid?: string },
): void;
export function listLiveHolders(dir: string): SimGpuHolder[];
export function isAlive(pid: number): boolean;
export function procStat(pid: number): { state: string; pgrp: number; startTime: string } | null;
