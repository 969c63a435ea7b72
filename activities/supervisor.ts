import { Context, log } from '@temporalio/activity';
import { ApplicationFailure } from '@temporalio/common';
import type { InferenceSlot, TrainingSlot } from '../schemas/entities';
import type { SlotState } from '../schemas/enums';
import { FailureType } from '../schemas/failures';
import { defaultFleetPolicy } from '../schemas/policy';
import type { SupervisorActionResponse, SupervisorStatus } from '../schemas/supervisor';
import { probeServingUrls } from './serving-url-probe';
import type { SupervisorTarget } from '../clients/supervisor-access';
import {
  checkFingerprints,
  type FingerprintChecking,
  type FingerprintTaking,
  type ReportedCheck,
  storeFingerprints,
} from './wake-fingerprint';
import { judgeGpu, type VerifiedGpu } from '../core/gpu-release';
import { describeInFlight, type InFlight, judgeDrain, sleepModeAfterDrain } from '../core/drain';
import { DEFAULT_POLL_INTERVAL_MS, DEFAULT_TRAINING_SETTLE_MS, type ActivityDeps } from './deps';
import { pause, stepBudgetLeftMs } from './step-budget';
import {
  actionOptions,
  cancellation,
  currentAttempt,
  heartbeatWhile,
  loadTarget,
  modelNamesOf,
  waitUntil,
  type WaitCheck,
} from './support';

export interface DomainInput {
  domainId: string;
}

/** What a drain saw last: whether it finished within its budget, and what was still in flight when it ended. */
export interface DrainResult {
  drained: boolean;
  runningRequests: number;
  waitingRequests: number;
  /** Models with requests running or waiting (or an unknown count) at the drain's last look. */
  inFlight: InFlight[];
}

/** Every step result says which attempt succeeded, so progress can show retries. */
export interface StepResult {
  attempt: number;
}

/**
 * How long a training stop's answer waits on the host for its trainer to end. A trainer that takes longer
 * (its grace) is waited for by reading the status, heartbeating.
 */
export const STOP_ANSWER_WAIT_MS = 5_000;

/** How old the host's GPU memory reading may be for the wake's re-check (see wakeModels). */
export const WAKE_MEMORY_MAX_AGE_MS = 1_000;

const invalidTarget = (message: string) => ApplicationFailure.nonRetryable(message, FailureType.InvalidTarget);

/** Throws retryable NotYet when the supervisor accepted only part of an action. */
function assertAccepted(action: string, response: SupervisorActionResponse): void {
  if (response.accepted && response.errors.length === 0) return;
  const why = response.errors.map((e) => `${e.target}: ${e.message}`).join('; ') || 'not accepted';
  throw ApplicationFailure.retryable(`supervisor refused ${action}: ${why}`, FailureType.NotYet);
}

/** Model states for the given names; throws InvalidTarget for a layout model the host does not run. */
function modelStates(status: SupervisorStatus, names: readonly string[]) {
  return names.map((name) => {
    const model = status.models.find((m) => m.name === name);
    if (!model) throw invalidTarget(`model ${name} of the layout is not run by the supervisor`);
    return model;
  });
}

/** Training runs for the given GPUs; throws InvalidTarget for a layout GPU the host has no trainer on. */
function trainingRuns(status: SupervisorStatus, gpus: readonly number[]) {
  return gpus.map((gpu) => {
    const run = status.training.find((r) => r.gpuIndex === gpu);
    if (!run) throw invalidTarget(`training slot on GPU ${gpu} of the layout is not configured on the supervisor`);
    return run;
  });
}

/**
 * Supervisor activities: each asks the domain's supervisor for an effect, then proves it by re-reading
 * the host's state (a 200 is never proof), heartbeating while it waits. They run until the effect holds or
 * the step budget (the activity's schedule-to-close timeout) cancels them; transient supervisor errors
 * throw retryable failures so Temporal retries within that budget. Every one is safe to repeat.
 */
export function createSupervisorActivities(deps: ActivityDeps) {
  const { supervisor, store } = deps;
  const intervalMs = deps.pollIntervalMs ?? DEFAULT_POLL_INTERVAL_MS;
  const settleMs = deps.trainingSettleMs ?? DEFAULT_TRAINING_SETTLE_MS;

  // Slot rows are bookkeeping for the UI: a lost race (row already moved) is not an error.
  const moveSlots = async (slots: readonly (InferenceSlot | TrainingSlot)[], to: SlotState) => {
    for (const slot of slots) await store.slots.transition(slot.id, to).catch(() => null);
  };

  const status = (host: SupervisorTarget) => supervisor.status(host, { signal: cancellation() });

  return {
    /**
     * Stops every training run of the domain's layout: SIGTERM, SIGKILL after `graceMs` (the supervisor's
     * job), done when every training slot reports idle with no live pid. Returns the trainers' pids (also
     * those seen by an earlier attempt, kept in heartbeat details) for verifyGpuReleased, and when the last of
     * them ended on the host's clock (`trainerEndedAt`, null when none ran), from which the host's GPU reading
     * counts.
     */
    async stopTraining(
      input: DomainInput & { graceMs: number },
    ): Promise<StepResult & { trainerPids: number[]; trainerEndedAt: string | null }> {
      const target = await loadTarget(deps, input.domainId);
      const host = target.domain;
      const gpus = target.training.map((s) => s.gpuIndex);
      const pids = new Set<number>(
        (Context.current().info.heartbeatDetails as { trainerPids?: number[] })?.trainerPids,
      );
      if (gpus.length === 0) return { attempt: currentAttempt(), trainerPids: [], trainerEndedAt: null };
      const notePids = (s: SupervisorStatus) =>
        trainingRuns(s, gpus).forEach((r) => r.pids.forEach((p) => pids.add(p)));
      // Every GPU at once, each answered when its trainer has ended (or STOP_ANSWER_WAIT_MS on, and at most half
      // the budget left, so that a trainer outliving it is reported by what the status shows): the status read
      // below then proves the end rather than polls for it. The answers name the processes stopped.
      const budgetLeftMs = stepBudgetLeftMs();
      const waitMs = Math.min(
        input.graceMs + 1_000,
        STOP_ANSWER_WAIT_MS,
        budgetLeftMs === null ? Infinity : Math.floor(budgetLeftMs / 2),
      );
      const moving = moveSlots(target.training, 'stopping'); // never rejects: bookkeeping for the UI
      let answers: SupervisorActionResponse[];
      try {
        answers = await heartbeatWhile(
          `stop of training on GPU ${gpus.join(', ')}`,
          Promise.all(
            gpus.map((gpuIndex) =>
              supervisor.stopTraining(host, { gpuIndex, graceMs: input.graceMs, waitMs }, actionOptions()),
            ),
          ),
          { trainerPids: [...pids] }, // an earlier attempt's, kept for the next
        );
      } finally {
        await moving; // never after this step's end, where compensation writes the same rows
      }
      for (const answer of answers) {
        for (const run of answer.stopping ?? []) run.pids.forEach((p) => pids.add(p));
      }
      Context.current().heartbeat({ waitingFor: 'training to end', trainerPids: [...pids] });
      const runs = await waitUntil(async (): Promise<WaitCheck<SupervisorStatus['training']>> => {
        const s = await status(host);
        notePids(s);
        const busy = trainingRuns(s, gpus).filter((r) => r.state !== 'idle' || r.pids.length > 0);
        if (busy.length === 0) return { done: true, value: trainingRuns(s, gpus) };
        return {
          done: false,
          waitingFor: `training still running on GPU ${busy.map((r) => `${r.gpuIndex} (${r.state}, pids ${r.pids.join(',') || 'none'})`).join(', ')}`,
          details: { trainerPids: [...pids] },
        };
      }, intervalMs);
      await moveSlots(target.training, 'idle');
      const ends = runs.flatMap((r) => r.lastExit?.at ?? []).sort();
      return {
        attempt: currentAttempt(),
        trainerPids: [...pids].sort((a, b) => a - b),
        trainerEndedAt: pids.size > 0 ? (ends.at(-1) ?? null) : null,
      };
    },

    /**
     * Proves each training GPU is ready for its sleeping vLLMs to wake: no process in `trainerPids` holds
     * memory; memory held by anything but this GPU's own vLLM servers (their residue while asleep: CUDA context
     * and graph pools) is at most `maxUsedRatio` of the GPU; and free memory covers what those servers need to
     * wake. A GPU whose memory cannot be read for want of privilege, or that is lost, fails at once
     * (non-retryable InvalidTarget). Without a total (the device prints `[N/A]`) only the pid check applies,
     * and the result says so (`proof`). Its first reading is one the host started at or after `trainerEndedAt`
     * (the host starts one as a trainer ends), later ones are run afresh.
     */
    async verifyGpuReleased(
      input: DomainInput & { trainerPids: number[]; trainerEndedAt?: string | null; maxUsedRatio: number },
    ): Promise<StepResult & { gpus: VerifiedGpu[] }> {
      const target = await loadTarget(deps, input.domainId);
      const gpus = target.training.map((s) => s.gpuIndex);
      const host = target.domain;
      let since = input.trainerEndedAt ?? undefined;
      const report = await waitUntil(async () => {
        const memory = await supervisor.gpuMemory(host, { signal: cancellation(), since });
        since = undefined;
        const problems: string[] = [];
        const seen = gpus.map((index) => {
          const gpu = memory.gpus.find((g) => g.index === index);
          if (!gpu) throw invalidTarget(`GPU ${index} of the layout is not reported by the supervisor`);
          const verdict = judgeGpu(gpu, input.trainerPids, input.maxUsedRatio);
          if (verdict.fatal) throw invalidTarget(verdict.fatal);
          problems.push(...verdict.problems);
          return verdict.seen;
        });
        return problems.length === 0
          ? { done: true, value: seen }
          : { done: false, waitingFor: problems.join('; '), details: { gpus: seen } };
      }, intervalMs);
      return { attempt: currentAttempt(), gpus: report };
    },

    /**
     * Wakes every inference slot; done when every model of the layout reports awake. Re-proves first that
     * training is still stopped on the domain's training GPUs (an attempt resumed after a restart may find
     * trainers running again, and vLLM must never wake beside them), then that each inference GPU still has
     * the free memory its sleeping engines need to wake; either lost fails with PreconditionLost, not retried.
     */
    async wakeModels(input: DomainInput): Promise<StepResult & { models: string[] }> {
      const target = await loadTarget(deps, input.domainId);
      const host = target.domain;
      const names = modelNamesOf(target.inference);
      // The two reads are independent: asked at once.
      // The release step's own reading, taken a moment ago on the host, is reused rather than run again (100 ms
      // and more of nvidia-smi); a wake that starts later than that (a retry, a resumed attempt) reads afresh.
      const [before, memory] = await Promise.all([
        status(host),
        supervisor.gpuMemory(host, { signal: cancellation(), maxAgeMs: WAKE_MEMORY_MAX_AGE_MS }),
      ]);
      const training = trainingRuns(
        before,
        target.training.map((s) => s.gpuIndex),
      ).filter((r) => r.state !== 'idle' || r.pids.length > 0);
      if (training.length > 0) {
        throw ApplicationFailure.nonRetryable(
          `training runs again on GPU ${training.map((r) => `${r.gpuIndex} (${r.state}, pids ${r.pids.join(',') || 'none'})`).join(', ')}; refusing to wake models beside it`,
          FailureType.PreconditionLost,
          { gpus: training.map((r) => r.gpuIndex) },
        );
      }
      // And that the memory verifyGpuReleased found free is still free: a trainer (or anything else) that
      // came back between the check and the wake would leave the engines too little to wake into.
      const asleep = new Set(before.models.filter((m) => m.state === 'asleep').map((m) => m.name));
      const short = memory.gpus.flatMap((gpu) => {
        const sleeping = gpu.models.filter((m) => asleep.has(m.name));
        const needMiB = sleeping.reduce<number | null>(
          (n, m) => (n === null || m.wakeNeedMiB === null ? null : n + m.wakeNeedMiB),
          0,
        );
        const freeMiB = gpu.totalMiB === null || gpu.usedMiB === null ? null : gpu.totalMiB - gpu.usedMiB;
        return sleeping.length > 0 && needMiB !== null && freeMiB !== null && freeMiB < needMiB
          ? [`GPU ${gpu.index}: ${freeMiB} MiB free, the models need ${needMiB} MiB to wake`]
          : [];
      });
      if (short.length > 0) {
        throw ApplicationFailure.nonRetryable(
          `${short.join('; ')}; refusing to wake models that would not fit`,
          FailureType.PreconditionLost,
        );
      }
      const moving = moveSlots(target.inference, 'waking'); // never rejects: bookkeeping for the UI
      try {
        for (const slot of target.inference) {
          assertAccepted(
            `wake of GPU ${slot.gpuIndex}`,
            await heartbeatWhile(
              `wake of GPU ${slot.gpuIndex}`,
              supervisor.wake(host, { gpuIndex: slot.gpuIndex }, actionOptions()),
            ),
          );
        }
      } finally {
        await moving; // never after this step's end, where compensation writes the same rows
      }
      await waitUntil(async () => {
        const notAwake = modelStates(await status(host), names).filter((m) => m.state !== 'awake');
        return notAwake.length === 0
          ? { done: true, value: true }
          : {
              done: false,
              waitingFor: `models not awake: ${notAwake.map((m) => `${m.name} (${m.state})`).join(', ')}`,
            };
      }, intervalMs);
      await moveSlots(target.inference, 'probing');
      return { attempt: currentAttempt(), models: names };
    },

    /**
     * Sends a synthetic completion to every model of the layout, through its supervisor (the host's loopback)
     * and, at the same time, through its servingUrl (probeServingUrls), then checks the woken models'
     * fingerprints. Any model that errors, answers empty or is missing from
     * the answer fails the step with non-retryable ProbeFailed (Unauthorized for a 401).
     */
    async probeModels(
      input: DomainInput & { prompt: string; maxTokens: number; timeoutMs: number; fingerprint?: FingerprintChecking },
    ): Promise<StepResult & { results: { model: string; latencyMs: number; fingerprint?: ReportedCheck }[] }> {
      const target = await loadTarget(deps, input.domainId);
      const names = modelNamesOf(target.inference);
      // Both probes run at once (each is a completion the engine answers in model time), and are judged in this
      // order, so a model that fails on its host is reported as such even when its servingUrl failed too.
      const onHost = supervisor.probe(
        target.domain,
        { prompt: input.prompt, maxTokens: input.maxTokens, timeoutMs: input.timeoutMs, models: names },
        { signal: cancellation(), timeoutMs: input.timeoutMs + 5_000 },
      );
      // As the proxy will reach them: the layout's servingUrl, from this worker, with its upstreamAuth.
      const throughServingUrl = probeServingUrls(target.inference, input, {
        fetch: deps.fetch,
        credentials: deps.upstreamCredentials,
      });
      // Judged only after the host's answer: a failure there must not leave this rejection unhandled.
      throughServingUrl.catch(() => undefined);
      const response = await heartbeatWhile(`probe of ${names.join(', ')}`, onHost);
      const results = names.map((name) => {
        const r = response.results.find((x) => x.model === name);
        if (!r)
          throw ApplicationFailure.nonRetryable(`model ${name} was not probed`, FailureType.ProbeFailed, {
            model: name,
          });
        if (!r.ok) {
          // A 401 from vLLM is configuration (its --api-key), not a model that answered wrong.
          const isAuth = r.error?.startsWith('HTTP 401') ?? false;
          throw ApplicationFailure.nonRetryable(
            `model ${name} failed its probe: ${r.error ?? 'no answer'}`,
            isAuth ? FailureType.Unauthorized : FailureType.ProbeFailed,
            {
              model: name,
            },
          );
        }
        return { model: name, latencyMs: r.latencyMs };
      });
      await heartbeatWhile(`probe of ${names.join(', ')} through their servingUrl`, throughServingUrl);
      // The fingerprint check comes after both, on a model known to answer where clients will reach it.
      // Executions scheduled before the fingerprint check pass no settings: they get the policy defaults.
      const checks = await checkFingerprints(
        deps,
        target,
        input.fingerprint ?? defaultFleetPolicy().probe.fingerprint,
        input.timeoutMs,
      );
      await moveSlots(target.inference, 'serving');
      return { attempt: currentAttempt(), results: results.map((r) => ({ ...r, fingerprint: checks[r.model] })) };
    },

    /**
     * Puts every inference slot to sleep at its slot's level; done when every model reports asleep.
     * Refuses (non-retryable InvalidTarget) while the domain is the fleet's active: sleeping it would cut
     * live traffic.
     */
    async sleepModels(
      input: DomainInput & { fleetId: string; fingerprint?: FingerprintTaking },
    ): Promise<StepResult & { models: string[] }> {
      const target = await loadTarget(deps, input.domainId);
      const fleet = await store.fleets.snapshot(input.fleetId);
      if (fleet?.activeDomainId === input.domainId) {
        throw invalidTarget(`domain ${target.domain.slug} is the active domain; refusing to put it to sleep`);
      }
      const host = target.domain;
      const names = modelNamesOf(target.inference);
      const before = await status(host);
      if (input.fingerprint) await storeFingerprints(deps, target, before, input.fingerprint);
      // Nothing left in flight after the drain: `wait` finishes a request that slipped in since rather than cut it.
      const mode = sleepModeAfterDrain(judgeDrain(modelStates(before, names)));
      for (const slot of target.inference) {
        assertAccepted(
          `sleep of GPU ${slot.gpuIndex}`,
          await heartbeatWhile(
            `sleep of GPU ${slot.gpuIndex}`,
            supervisor.sleep(host, { gpuIndex: slot.gpuIndex, level: slot.sleepLevel, mode }, actionOptions()),
          ),
        );
      }
      await waitUntil(async () => {
        const awake = modelStates(await status(host), names).filter((m) => m.state !== 'asleep');
        return awake.length === 0
          ? { done: true, value: true }
          : { done: false, waitingFor: `models not asleep: ${awake.map((m) => `${m.name} (${m.state})`).join(', ')}` };
      }, intervalMs);
      await moveSlots(target.inference, 'sleeping');
      return { attempt: currentAttempt(), models: names };
    },

    /**
     * Starts training on every training slot and proves each run alive: running with a live pid, and still
     * running with the same leader after a short settle. A run that dies meanwhile throws retryable NotYet.
     */
    async startTraining(input: DomainInput): Promise<StepResult & { runs: { gpuIndex: number; pids: number[] }[] }> {
      const target = await loadTarget(deps, input.domainId);
      const host = target.domain;
      const gpus = target.training.map((s) => s.gpuIndex);
      if (gpus.length === 0) return { attempt: currentAttempt(), runs: [] };
      for (const gpuIndex of gpus) {
        assertAccepted(
          `training start on GPU ${gpuIndex}`,
          await heartbeatWhile(
            `training start on GPU ${gpuIndex}`,
            supervisor.startTraining(host, { gpuIndex }, actionOptions()),
          ),
        );
      }
      const started = await waitUntil(async () => {
        const runs = trainingRuns(await status(host), gpus);
        const waiting = runs.filter((r) => r.state !== 'running' || r.pids.length === 0);
        return waiting.length === 0
          ? { done: true, value: runs.map((r) => ({ gpuIndex: r.gpuIndex, pids: r.pids })) }
          : {
              done: false,
              waitingFor: `training not running on GPU ${waiting.map((r) => `${r.gpuIndex} (${r.state})`).join(', ')}`,
            };
      }, intervalMs);
      Context.current().heartbeat({ waitingFor: 'training to settle', runs: started });
      await pause(settleMs);
      const after = trainingRuns(await status(host), gpus);
      for (const run of started) {
        const now = after.find((r) => r.gpuIndex === run.gpuIndex);
        if (now?.state !== 'running' || now.pids[0] !== run.pids[0]) {
          const exit = now?.lastExit ? ` (exit code ${now.lastExit.code}, signal ${now.lastExit.signal})` : '';
          throw ApplicationFailure.retryable(
            `training on GPU ${run.gpuIndex} did not stay up${exit}`,
            FailureType.NotYet,
          );
        }
      }
      await moveSlots(target.training, 'training');
      return { attempt: currentAttempt(), runs: started };
    },

    /**
     * Waits until no model of the domain reports requests running or waiting (vLLM's `abort` sleep would end
     * both), for at most `timeoutMs` counted from when the step was first scheduled. Returns `drained: false` at
     * the deadline instead of failing, with what was still in flight per model: a demotion goes on after its
     * drain budget. A model whose count is unknown counts as busy.
     */
    async drainDomain(input: DomainInput & { timeoutMs: number }): Promise<StepResult & DrainResult> {
      const target = await loadTarget(deps, input.domainId);
      const host = target.domain;
      const names = modelNamesOf(target.inference);
      const deadline = Context.current().info.scheduledTimestampMs + input.timeoutMs;
      const outcome = await waitUntil(async (): Promise<WaitCheck<DrainResult>> => {
        const look = judgeDrain(modelStates(await status(host), names));
        const result = {
          runningRequests: look.runningRequests,
          waitingRequests: look.waitingRequests,
          inFlight: look.inFlight,
        };
        if (look.isDrained) return { done: true, value: { drained: true, ...result } };
        if (deps.now().getTime() >= deadline) {
          log.warn('drain budget spent', { domainId: input.domainId, ...result, unknown: look.unknown });
          return { done: true, value: { drained: false, ...result } };
        }
        return { done: false, waitingFor: `requests in flight: ${describeInFlight(look.inFlight)}` };
      }, intervalMs);
      return { attempt: currentAttempt(), ...outcome };
    },
  };
}
