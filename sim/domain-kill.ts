import { readFileSync, rmSync } from 'node:fs';
import path from 'node:path';
import { createProcessTable } from '../supervisor/process-group';
import { runFilePath } from '../supervisor/training';
import { isAlive, procStat } from './gpu-state';
import { findMarkedPids, hasExited, pollUntil, signalGroup, signalPid, type SimChild } from './processes';

/** Written in the state dir while a domain runs: what `haru sim kill` reads. */
export const SIM_STATE_FILE = 'sim.json';

export interface StateFile {
  marker: string;
  pids: number[];
  checkpointDirs: string[];
  supervisorUrl: string;
}

/**
 * SIGKILLs every process of a domain: its live children's groups, every process carrying its marker (a marked
 * group leader takes its whole group with it), and the training groups recorded in the checkpoint dirs when
 * their leader is still the recorded process. Resolves when no marked process is left.
 */
export async function killProcesses(children: SimChild[], marker: string, checkpointDirs: string[]): Promise<void> {
  // An unreaped child keeps its pid, so its group id cannot have been recycled.
  for (const child of children) if (!hasExited(child)) signalGroup(child.process.pid, 'SIGKILL');
  const { trainingGroups } = killMarked(marker, checkpointDirs);
  await Promise.all(children.map((c) => c.exited));
  // A SIGKILL is delivered, not awaited: the trainers (not our children) may outlive the call by a moment.
  const table = createProcessTable();
  await pollUntil(
    () => findMarkedPids(marker).length === 0 && trainingGroups.every((g) => table.groupPids(g).length === 0),
    10_000,
  );
}

/** SIGKILLs what carries `marker` and the recorded training groups; returns how many marked and which groups. */
function killMarked(marker: string, checkpointDirs: string[]): { marked: number; trainingGroups: number[] } {
  const marked = findMarkedPids(marker);
  for (const pid of marked) {
    if (procStat(pid)?.pgrp === pid) signalGroup(pid, 'SIGKILL');
    else signalPid(pid, 'SIGKILL');
  }
  const table = createProcessTable();
  const trainingGroups: number[] = [];
  for (const run of trainingRuns(checkpointDirs)) {
    if (isAlive(run.pgid) && run.startTime && table.startTime(run.pgid) === run.startTime) {
      signalGroup(run.pgid, 'SIGKILL');
      trainingGroups.push(run.pgid);
    }
  }
  return { marked: marked.length, trainingGroups };
}

function trainingRuns(checkpointDirs: string[]): { pgid: number; startTime: string | null }[] {
  return checkpointDirs.flatMap((dir) => {
    try {
      return [JSON.parse(readFileSync(runFilePath(dir), 'utf8')) as { pgid: number; startTime: string | null }];
    } catch {
      return [];
    }
  });
}

export function readState(stateDir: string): StateFile | null {
  try {
    return JSON.parse(readFileSync(path.join(stateDir, SIM_STATE_FILE), 'utf8')) as StateFile;
  } catch {
    return null;
  }
}

/** The marker of the domain now recorded in `stateDir`, or null when none is. */
export const simDomainMarker = (stateDir: string): string | null => readState(path.resolve(stateDir))?.marker ?? null;

/**
 * SIGKILLs a domain started from `stateDir` by another process (`haru sim kill`): every process carrying the
 * domain's marker and its recorded training groups. With `onlyMarker`, only when the domain recorded there is
 * still that run (not one started again from the same directory since). Returns how many marked processes it
 * found; 0 when nothing ran.
 */
export async function killSimDomain(stateDir: string, opts: { onlyMarker?: string | null } = {}): Promise<number> {
  const state = readState(path.resolve(stateDir));
  if (!state) return 0;
  if (opts.onlyMarker !== undefined && state.marker !== opts.onlyMarker) return 0;
  const killed = killMarked(state.marker, state.checkpointDirs).marked;
  await pollUntil(() => findMarkedPids(state.marker).length === 0, 10_000);
  rmSync(path.join(path.resolve(stateDir), SIM_STATE_FILE), { force: true });
  return killed;
}
