import { closeSync, fstatSync, rmSync } from 'node:fs';
import path from 'node:path';
import { z } from 'zod';
import type { TrainerProgress } from '../schemas/supervisor';
import { openInTrainerDir, readUpTo } from './trainer-dir';

/**
 * The progress protocol: the supervisor passes `HARU_TRAINING_PROGRESS_FILE` (this file in the slot's checkpoint
 * directory) and the trainer replaces it, as often as it likes, with one JSON object `{step, totalSteps?, loss?}`
 * (write a temporary file, then rename it over: a reader never sees half an object). The file's mtime is when
 * the figure was reported. A file rather than stdout: a trainer's stdout carries its framework's logs and
 * progress bars, and an HF Trainer callback (`on_log`: `state.global_step`, `state.max_steps`, `logs["loss"]`)
 * writes a file in three lines.
 */
export const PROGRESS_FILE = '.haru-training-progress.json';
export const PROGRESS_ENV = 'HARU_TRAINING_PROGRESS_FILE';

/** Larger than any progress object: a trainer that writes more is not reporting progress. */
const MAX_BYTES = 4096;

const progressFileSchema = z.object({
  step: z.number().int().nonnegative(),
  totalSteps: z.number().int().positive().nullable().optional(),
  loss: z.number().nullable().optional(),
});

export const progressFile = (checkpointDir: string) => path.join(checkpointDir, PROGRESS_FILE);

/** A new run reports afresh: the last run's figure would otherwise pass for this one's. */
export function clearProgress(checkpointDir: string): void {
  rmSync(progressFile(checkpointDir), { force: true });
}

/**
 * What the trainer last reported, with its age; null when it has reported nothing. A file the supervisor cannot
 * use is reported as `error`, never thrown. The trainer owns the directory (a `runAs` user may be anyone), so the
 * file is opened without following a symlink and without blocking on a FIFO (supervisor/trainer-dir.ts), and only
 * a small regular file is read.
 */
export function readProgress(checkpointDir: string, now: Date): TrainerProgress | null {
  let fd: number;
  try {
    fd = openInTrainerDir(progressFile(checkpointDir));
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return null;
    return failed(`cannot open ${PROGRESS_FILE}: ${(err as Error).message}`, null, now);
  }
  try {
    const stat = fstatSync(fd);
    const at = stat.mtime;
    if (!stat.isFile()) return failed(`${PROGRESS_FILE} is not a regular file`, at, now);
    if (stat.size > MAX_BYTES) return failed(`${PROGRESS_FILE} is over ${MAX_BYTES} bytes`, at, now);
    const text = readUpTo(fd, MAX_BYTES);
    let json: unknown;
    try {
      json = JSON.parse(text);
    } catch {
      return failed(`${PROGRESS_FILE} is not JSON`, at, now);
    }
    const parsed = progressFileSchema.safeParse(json);
    if (!parsed.success) {
      const issue = parsed.error.issues[0]!;
      return failed(`${PROGRESS_FILE}: ${issue.path.join('.') || 'value'}: ${issue.message}`, at, now);
    }
    const { step, totalSteps = null, loss = null } = parsed.data;
    return { step, totalSteps, loss, ...when(at, now), error: null };
  } finally {
    closeSync(fd);
  }
}

const when = (at: Date | null, now: Date) => ({
  at: at?.toISOString() ?? null,
  ageMs: at ? Math.max(0, now.getTime() - at.getTime()) : null,
});

const failed = (error: string, at: Date | null, now: Date): TrainerProgress => ({
  step: null,
  totalSteps: null,
  loss: null,
  ...when(at, now),
  error,
});
