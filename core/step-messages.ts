import { describeInFlight, type InFlight } from './drain';

/**
 * The message each step records when it succeeds (the `operation.step` event), written by the step
 * activities, which record their own progress (activities/step-journal.ts).
 */
export const stepMessages = {
  stopTraining: (r: { trainerPids: readonly number[] }) =>
    `training stopped (trainer pids ${r.trainerPids.join(', ') || 'none'})`,
  verifyGpuReleased: (r: { gpus: readonly { index: number; usedMiB: number; totalMiB: number | null }[] }) =>
    `GPU memory released (${r.gpus.map((g) => `GPU ${g.index}: ${g.usedMiB}/${g.totalMiB ?? '?'} MiB`).join(', ')})`,
  wakeModels: (r: { models: readonly string[] }) => `models awake: ${r.models.join(', ')}`,
  probeModels: (r: { results: readonly { model: string; latencyMs: number; fingerprint?: { note: string } }[] }) =>
    `every model answered (${r.results.map((x) => `${x.model} ${x.latencyMs} ms`).join(', ')})${fingerprintNotes(r.results)}`,
  commitRouting: (r: { routeRevision: number }) => `routing committed at revision ${r.routeRevision}`,
  // Results recorded before the waiting count carry neither `waitingRequests` nor `inFlight`.
  drainDomain: (r: { drained: boolean; runningRequests: number; waitingRequests?: number; inFlight?: InFlight[] }) =>
    r.drained
      ? `drained: no requests ${r.waitingRequests === undefined ? 'running' : 'running or waiting'}`
      : `drain budget spent with ${r.runningRequests} requests running${r.waitingRequests === undefined ? '' : ` and ${r.waitingRequests} waiting`}${r.inFlight?.length ? ` (${describeInFlight(r.inFlight)})` : ''}`,
  sleepModels: (r: { models: readonly string[] }) => `models asleep: ${r.models.join(', ')}`,
  startTraining: (r: { runs: readonly { gpuIndex: number; pids: readonly number[] }[] }) =>
    `training running (${r.runs.map((x) => `GPU ${x.gpuIndex} pid ${x.pids[0]}`).join(', ')})`,
} as const;

/** The wake-fidelity verdicts of a probe, when it made any (results recorded before it carry none). */
function fingerprintNotes(results: readonly { fingerprint?: { note: string } }[]): string {
  const notes = results.flatMap((x) => (x.fingerprint ? [x.fingerprint.note] : []));
  return notes.length ? `; ${notes.join('; ')}` : '';
}

/** The step activities that can record their own progress. */
export type JournaledActivity = keyof typeof stepMessages;
