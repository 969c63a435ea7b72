/** Types for sim/gpu-state.js (plain CommonJS so the fake nvidia-smi starts fast under plain node). */

export interface SimGpu {
  index: number;
  /** nvidia-smi style UUID: `GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx`. */
  uuid: string;
  name: string;
  totalMiB: number;
}

/** How the fake nvidia-smi misbehaves: exit non-zero with a driver error, or print unparseable output. */
export type SmiFault = null | 'fail' | 'garbage';

export interface SimGpuInventory {
  gpus: SimGpu[];
  /** MIG mode: `memory.used`/`memory.total` read `[N/A]`; per-process figures stay available. */
  mig: boolean;
  /** Memory the driver itself reports as used on every GPU (real idle GPUs show a few MiB). */
  baselineMiB: number;
  fault: SmiFault;
}

export interface SimGpuHolder {
  pid: number;
  gpuIndex: number;
  usedMiB: number;
  label: string;
  startTime: string | null;
}

export const INVENTORY_FILE: string;
export const HOLDERS_DIR: string;
export function writeJsonAtomic(file: string, data: unknown): void;
export function writeInventory(dir: string, inventory: SimGpuInventory): void;
export function readInventory(dir: string): SimGpuInventory;
export function updateInventory(dir: string, patch: Partial<SimGpuInventory>): void;
export function setHolding(
  dir: string,
  holding: { pid?: number; gpuIndex: number; usedMiB: number; label?: string },
): void;
export function listLiveHolders(dir: string): SimGpuHolder[];
export function isAlive(pid: number): boolean;
export function procStat(pid: number): { state: string; pgrp: number; startTime: string } | null;
