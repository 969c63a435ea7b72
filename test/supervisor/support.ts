/** Helpers for supervisor and simulator tests: condition polling, temp dirs, trainer logs. */
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';

export const REPO_ROOT = path.resolve(__dirname, '../..');
export const TRAINER = path.join(REPO_ROOT, 'sim/trainer.js');
export const FAKE_NVIDIA_SMI = path.join(REPO_ROOT, 'sim/bin/nvidia-smi');
export const FAKE_ROCM_SMI = path.join(REPO_ROOT, 'sim/bin/rocm-smi');

import { eventually, type Truthy } from '../support/eventually';

export type { Truthy };

/** Polls `condition` until it returns a truthy value (returned) or `timeoutMs` passes: never a fixed sleep. */
export const waitFor = <T>(
  what: string,
  condition: () => T | Promise<T>,
  { timeoutMs = 30_000, intervalMs = 25 } = {},
): Promise<Truthy<T>> => eventually(what, condition, timeoutMs, intervalMs);

/** A fresh temporary directory; `cleanup()` removes every one made so far. */
export function tempDirs() {
  const made: string[] = [];
  return {
    make(prefix = 'haru-sup-') {
      const dir = mkdtempSync(path.join(os.tmpdir(), prefix));
      made.push(dir);
      return dir;
    },
    cleanup() {
      for (const dir of made.splice(0)) rmSync(dir, { recursive: true, force: true });
    },
  };
}

export interface TrainerEvent {
  event: string;
  pid: number;
  [key: string]: unknown;
}

/** The fake trainer's event log in `checkpointDir` (empty when it has not started yet). */
export function trainerEvents(checkpointDir: string): TrainerEvent[] {
  try {
    return readFileSync(path.join(checkpointDir, 'trainer.log'), 'utf8')
      .split('\n')
      .filter(Boolean)
      .map((line) => JSON.parse(line) as TrainerEvent);
  } catch {
    return [];
  }
}

/** The step in the fake trainer's checkpoint, or -1 when none was written yet. */
export function checkpointStep(checkpointDir: string): number {
  try {
    return (JSON.parse(readFileSync(path.join(checkpointDir, 'checkpoint.json'), 'utf8')) as { step: number }).step;
  } catch {
    return -1;
  }
}
