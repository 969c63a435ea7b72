import type { Activities } from '../../../activities';
import type { StepJournal } from '../../../activities/step-journal';
import { defaultFleetPolicy, type FleetPolicy } from '../../../schemas/policy';

/** Fixed ids for workflow tests with stub activities. */
export const STUB = {
  fleet: '30000000-0000-4000-8000-000000000001',
  active: '30000000-0000-4000-8000-00000000000a',
  standby: '30000000-0000-4000-8000-00000000000b',
  op: '30000000-0000-4000-8000-0000000000f1',
} as const;

/** A policy with short budgets so failures surface in seconds. */
export const fastPolicy = (over: Partial<FleetPolicy> = {}): FleetPolicy => ({
  ...defaultFleetPolicy(),
  heartbeatIntervalMs: 100,
  heartbeatStaleMs: 2_000,
  trainingStopGraceMs: 200,
  stopTrainingTimeoutMs: 3_000,
  verifyGpuTimeoutMs: 3_000,
  wakeTimeoutMs: 3_000,
  probeTimeoutMs: 3_000,
  commitTimeoutMs: 3_000,
  drainTimeoutMs: 500,
  sleepTimeoutMs: 3_000,
  startTrainingTimeoutMs: 3_000,
  ...over,
});

/**
 * Stub activities typed `Activities`: each records its name (and step events as `step:<name>:<status>`,
 * whether the workflow records them or a journaled step does) in `calls` and answers like a healthy
 * fleet, unless overridden.
 */
export function stubActivities(overrides: Partial<Activities> = {}, policy: FleetPolicy = fastPolicy()) {
  const calls: string[] = [];
  const finished: { outcome: string; error?: unknown }[] = [];
  const base: Activities = {
    async beginOperation(input) {
      return {
        state: 'running',
        isRoutingCommitted: false,
        routeRevision: null,
        fromDomainId: input.kind === 'promote' ? STUB.active : null,
        policy,
        target: { id: input.targetDomainId, slug: 'b', isActive: false, inferenceSlotCount: 1, trainingSlotCount: 1 },
      };
    },
    async inspectDomain(input) {
      return { id: input.domainId, slug: 'a', isActive: false, inferenceSlotCount: 1, trainingSlotCount: 1, policy };
    },
    async recordStep(input) {
      calls.push(`step:${input.step}:${input.status}`);
    },
    async commitRouting() {
      return { outcome: 'committed', routeRevision: 2 };
    },
    async readRoutingOutcome() {
      return { isRoutingCommitted: false, routeRevision: null };
    },
    async finishOperation(input) {
      finished.push({ outcome: input.outcome, error: input.error });
      return { state: input.outcome };
    },
    async markDomainFailed() {
      return { changed: true };
    },
    async setAutoFailoverPause() {
      return { changed: true };
    },
    async requestPromotion(input) {
      return {
        outcome: 'created',
        operation: {
          id: STUB.op,
          fleetId: input.fleetId,
          kind: 'promote',
          targetDomainId: input.targetDomainId,
          state: 'pending',
          reason: input.reason,
          requestedBy: 'monitor',
        },
      };
    },
    async stopTraining() {
      return { attempt: 1, trainerPids: [42], trainerEndedAt: null };
    },
    async verifyGpuReleased() {
      return { attempt: 1, gpus: [{ index: 0, usedMiB: 100, totalMiB: 80_000 }] };
    },
    async wakeModels() {
      return { attempt: 1, models: ['llama'] };
    },
    async probeModels() {
      return { attempt: 1, results: [{ model: 'llama', latencyMs: 5 }] };
    },
    async sleepModels() {
      return { attempt: 1, models: ['llama'] };
    },
    async startTraining() {
      return { attempt: 1, runs: [{ gpuIndex: 0, pids: [43] }] };
    },
    async restoreStandby() {
      return { attempt: 1, sleptGpus: [0], trainingStartedGpus: [0], problems: [] };
    },
    async stopActiveTraining() {
      return { stoppedGpus: [], problems: [] };
    },
    async drainDomain() {
      return { attempt: 1, drained: true, runningRequests: 0, waitingRequests: 0, inFlight: [] };
    },
    // The monitor's activities (activities/fleet-monitor.ts): tested against the real activities elsewhere.
    ...notStubbed('lookAtFleet', 'watchShard'),
    // Provisioning (activities/provisioning.ts): tested in test/provisioning/ against the real activities.
    ...notStubbed('beginProvisioning', 'launchDomain', 'resolveSupervisorUrl', 'awaitSupervisor', 'finishProvisioning'),
    ...notStubbed('beginTeardown', 'destroyDomain', 'finishTeardown', 'recordStandbyReplacement'),
  };
  const activities = Object.fromEntries(
    Object.entries({ ...base, ...overrides }).map(([name, fn]) => [
      name,
      async (...args: unknown[]) => {
        if (name !== 'recordStep') calls.push(name);
        // A journaled step records its own progress, as activities/step-journal.ts does.
        const journal = (args[0] as { journal?: StepJournal } | undefined)?.journal;
        if (journal) calls.push(`step:${journal.step}:started`);
        const result = await (fn as (...a: unknown[]) => Promise<unknown>)(...args);
        if (journal) calls.push(`step:${journal.step}:succeeded`);
        return result;
      },
    ]),
  ) as unknown as Activities;
  return { activities, calls, finished };
}

/** Activities a stub set does not answer: calling one fails the test with its name. */
function notStubbed<K extends keyof Activities>(...names: K[]): Pick<Activities, K> {
  return Object.fromEntries(
    names.map((name) => [
      name,
      async () => {
        throw new Error(`${name} is not stubbed in this test`);
      },
    ]),
  ) as unknown as Pick<Activities, K>;
}
