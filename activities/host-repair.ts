import { Context, log } from '@temporalio/activity';
import { ApplicationFailure } from '@temporalio/common';
import { FailureType } from '../schemas/failures';
import type { SupervisorActionResponse, SupervisorStatus } from '../schemas/supervisor';
import { hasActions, planStandbyRestore, type StandbyLayout, type StandbyRestorePlan } from '../core/standby-restore';
import { DEFAULT_POLL_INTERVAL_MS, type ActivityDeps } from './deps';
import { pause, stepBudgetLeftMs } from './step-budget';
import { cancellation, currentAttempt, heartbeatWhile, loadTarget } from './support';
import type { SupervisorTarget } from '../clients/supervisor-access';

export interface RestoreStandbyInput {
  fleetId: string;
  domainId: string;
  /** Why the standby is being put back (a failed promotion's compensation, the monitor's repair). */
  why: string;
  /** How long the sleeps, then the training starts, may take to show on the host. */
  waitMs: number;
  /** Do nothing while an operation is in flight (the monitor's repair: the operation owns the hosts). */
  unlessInOperation?: boolean;
}

export interface RestoreStandbyResult {
  attempt: number;
  /** GPUs whose models were put to sleep, and GPUs whose training was started. */
  sleptGpus: number[];
  trainingStartedGpus: number[];
  /** What could not be put back; empty when the standby is at rest. */
  problems: string[];
}

/** Rounds of sleeps and starts one restore makes at most: a host that moves under every round is left to the monitor. */
const MAX_RESTORE_ROUNDS = 3;

const refusal = (what: string, r: SupervisorActionResponse): string | null =>
  r.accepted && r.errors.length === 0
    ? null
    : `${what} refused: ${r.errors.map((e) => `${e.target}: ${e.message}`).join('; ') || 'not accepted'}`;

export interface StopActiveTrainingInput {
  fleetId: string;
  domainId: string;
  why: string;
  graceMs: number;
  waitMs: number;
}

/**
 * Host repairs: `restoreStandby`, the one way a standby is put back at rest after something left it half-promoted (a
 * promotion's compensation, the monitor's repair). Works from what the supervisor shows, per GPU and per
 * model (core/standby-restore.ts), not from what an earlier step believed it did: sleeps every GPU with a
 * model awake, then starts training on every idle training GPU whose models are asleep, and does that again
 * (up to MAX_RESTORE_ROUNDS, while a round fits in the step's budget) where the host moved under it: a wake
 * still in flight at its first look leaves a model awake that read asleep, and the supervisor refuses training
 * beside it (supervisor/gpu-exclusion.ts). What cannot be put back (a model that does not answer, a sleep or
 * start that did not take in the last round) is returned in `problems`, the
 * domain is marked degraded with them, and a `domain.restore` event records the outcome; the monitor tries
 * again later. Refuses the fleet's active domain (non-retryable InvalidTarget). Safe to repeat.
 */
export function createHostRepairActivities(deps: ActivityDeps) {
  const { supervisor, store } = deps;
  const intervalMs = deps.pollIntervalMs ?? DEFAULT_POLL_INTERVAL_MS;

  /** Polls the host until `isDone` holds or `waitMs` has passed; returns the last status. */
  async function settle(
    host: SupervisorTarget,
    waitMs: number,
    isDone: (s: SupervisorStatus) => boolean,
  ): Promise<SupervisorStatus> {
    const deadline = deps.now().getTime() + waitMs;
    for (;;) {
      const s = await supervisor.status(host, { signal: cancellation() });
      if (isDone(s) || deps.now().getTime() >= deadline) return s;
      Context.current().heartbeat({ waitingFor: 'the standby to settle' });
      await pause(intervalMs);
    }
  }

  return {
    /**
     * Stops training found running on the fleet's active (beside the models serving its traffic): SIGTERM,
     * then SIGKILL after `graceMs` (the supervisor's job), and records a `domain.repair` event. Does nothing
     * for a domain that is no longer the active. `problems` names the GPUs still training after `waitMs`.
     */
    async stopActiveTraining(input: StopActiveTrainingInput): Promise<{ stoppedGpus: number[]; problems: string[] }> {
      const target = await loadTarget(deps, input.domainId);
      const fleet = await store.fleets.snapshot(input.fleetId);
      // Only the active, and never while an operation owns the hosts.
      if (fleet?.activeDomainId !== input.domainId || fleet.inFlightOperation) return { stoppedGpus: [], problems: [] };
      const host = target.domain;
      const gpus = target.training.map((s) => s.gpuIndex);
      const running = (s: SupervisorStatus) =>
        s.training.filter((r) => gpus.includes(r.gpuIndex) && r.state !== 'idle').map((r) => r.gpuIndex);
      const found = running(await supervisor.status(host, { signal: cancellation() }));
      const problems: string[] = [];
      for (const gpuIndex of found) {
        try {
          const r = await heartbeatWhile(
            `stop of training on GPU ${gpuIndex}`,
            supervisor.stopTraining(
              host,
              { gpuIndex, graceMs: input.graceMs },
              { signal: cancellation(), timeoutMs: input.waitMs },
            ),
          );
          const why = refusal(`training stop on GPU ${gpuIndex}`, r);
          if (why) problems.push(why);
        } catch (err) {
          if (cancellation().aborted) throw err;
          problems.push(`training stop on GPU ${gpuIndex} failed: ${err instanceof Error ? err.message : String(err)}`);
        }
      }
      if (found.length === 0) return { stoppedGpus: [], problems: [] };
      const left = running(await settle(host, input.graceMs + input.waitMs, (s) => running(s).length === 0));
      problems.push(...left.map((g) => `training still running on GPU ${g}`));
      const stopped = found.filter((g) => !left.includes(g));
      await store.events.append({
        fleetId: input.fleetId,
        domainId: input.domainId,
        type: 'domain.repair',
        message: `active ${target.domain.slug} (${input.why}): ${stopped.length ? `training stopped on GPU ${stopped.join(', ')}` : 'training not stopped'}${problems.length ? `; ${problems.join('; ')}` : ''}`,
        data: { why: input.why, stoppedGpus: stopped, problems },
      });
      return { stoppedGpus: stopped, problems };
    },

    async restoreStandby(input: RestoreStandbyInput): Promise<RestoreStandbyResult> {
      const target = await loadTarget(deps, input.domainId);
      const fleet = await store.fleets.snapshot(input.fleetId);
      if (fleet?.activeDomainId === input.domainId) {
        throw ApplicationFailure.nonRetryable(
          `domain ${target.domain.slug} is the active domain; refusing to put it back on standby`,
          FailureType.InvalidTarget,
        );
      }
      if (input.unlessInOperation && fleet?.inFlightOperation) {
        return { attempt: currentAttempt(), sleptGpus: [], trainingStartedGpus: [], problems: [] };
      }
      const host = target.domain;
      const layout: StandbyLayout = {
        inference: target.inference.map((s) => ({ gpuIndex: s.gpuIndex, models: s.models.map((m) => m.name) })),
        trainingGpus: target.training.map((s) => s.gpuIndex),
      };
      const plan = (s: SupervisorStatus): StandbyRestorePlan => planStandbyRestore(layout, s);
      const request = { signal: cancellation(), timeoutMs: Math.max(1_000, input.waitMs) };
      // A stopping run (a stop the failed step asked for) must end before training can start again there.
      const stopping = (s: SupervisorStatus) =>
        s.training.some((r) => r.state === 'stopping' && layout.trainingGpus.includes(r.gpuIndex));

      /** Sleeps what is awake, then starts training where all sleeps; the plan left and the round's failures. */
      const round = async (slept: number[], started: number[]) => {
        const failures: string[] = [];
        const act = async (what: string, call: Promise<SupervisorActionResponse>): Promise<boolean> => {
          try {
            const why = refusal(what, await heartbeatWhile(what, call));
            if (why) failures.push(why);
            return why === null;
          } catch (err) {
            if (cancellation().aborted) throw err;
            failures.push(`${what} failed: ${err instanceof Error ? err.message : String(err)}`);
            return false;
          }
        };
        const first = plan(await supervisor.status(host, { signal: cancellation() }));
        const sleptNow: number[] = [];
        for (const gpuIndex of first.sleepGpus) {
          const level = target.inference.find((s) => s.gpuIndex === gpuIndex)?.sleepLevel ?? 1;
          if (await act(`sleep of GPU ${gpuIndex}`, supervisor.sleep(host, { gpuIndex, level }, request))) {
            sleptNow.push(gpuIndex);
          }
        }
        const afterSleep = plan(
          await settle(host, input.waitMs, (s) => !sleptNow.some((g) => plan(s).sleepGpus.includes(g)) && !stopping(s)),
        );
        const startedNow: number[] = [];
        for (const gpuIndex of afterSleep.startTrainingGpus) {
          if (await act(`training start on GPU ${gpuIndex}`, supervisor.startTraining(host, { gpuIndex }, request))) {
            startedNow.push(gpuIndex);
          }
        }
        const final = plan(
          await settle(host, input.waitMs, (s) => !startedNow.some((g) => plan(s).startTrainingGpus.includes(g))),
        );
        slept.push(...sleptNow.filter((g) => !slept.includes(g)));
        started.push(...startedNow.filter((g) => !started.includes(g)));
        return { final, failures };
      };

      // Another round when the host moved under the first: a wake still in flight when it looked (the model read
      // asleep, then woke, and the supervisor refused training beside it) is put to sleep and trained after. Only
      // while a whole round still fits in the step's budget.
      const slept: number[] = [];
      const started: number[] = [];
      const roundMs = 2 * input.waitMs; // its two waits; its requests are quick where a round is needed again
      let outcome = await round(slept, started);
      for (let n = 1; n < MAX_RESTORE_ROUNDS && hasActions(outcome.final); n += 1) {
        const left = stepBudgetLeftMs();
        if (left !== null && left < roundMs) break;
        outcome = await round(slept, started);
      }
      const { final, failures } = outcome;
      const problems = [
        ...final.unrestorable,
        ...final.sleepGpus.map((g) => `models on GPU ${g} still awake`),
        ...final.startTrainingGpus.map((g) => `training on GPU ${g} not running`),
        ...failures,
      ];
      await recordOutcome(input, target.domain.slug, slept, started, problems);
      return { attempt: currentAttempt(), sleptGpus: slept, trainingStartedGpus: started, problems };
    },
  };

  /** Marks the domain degraded with what is left (a ready one only: a failed one stays failed) and records the event. */
  async function recordOutcome(
    input: RestoreStandbyInput,
    slug: string,
    slept: number[],
    started: number[],
    problems: string[],
  ): Promise<void> {
    const done = [
      ...(slept.length ? [`slept GPU ${slept.join(', ')}`] : []),
      ...(started.length ? [`training started on GPU ${started.join(', ')}`] : []),
    ];
    if (problems.length === 0 && done.length === 0) return;
    const reason = `standby not fully restored: ${problems.join('; ')}`;
    let degraded = false;
    if (problems.length > 0) {
      log.warn('standby not fully restored', { domainId: input.domainId, why: input.why, problems });
      degraded = !!(await store.domains.transition(input.domainId, 'degraded', { lastError: reason, from: ['ready'] }));
    }
    await store.events.append({
      fleetId: input.fleetId,
      domainId: input.domainId,
      type: 'domain.restore',
      message: `standby ${slug} (${input.why}): ${[...done, ...(problems.length ? [reason] : ['at rest'])].join('; ')}`,
      // `degraded`: this restore moved the domain ready -> degraded (false: it was not ready, e.g. already failed).
      data: { why: input.why, sleptGpus: slept, trainingStartedGpus: started, problems, degraded },
    });
  }
}
