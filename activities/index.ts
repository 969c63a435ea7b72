import type { ActivityDeps } from './deps';
import { createFleetMonitorActivities } from './fleet-monitor';
import { createFleetStoreActivities } from './fleet-store';
import { createProvisioningActivities } from './provisioning';
import { withJournal } from './step-journal';
import { createHostRepairActivities } from './host-repair';
import { createSupervisorActivities } from './supervisor';
import { stepMessages } from '../core/step-messages';

/**
 * Every activity the worker registers, keyed by the name stored in workflow history (renaming one is a
 * breaking change). Workflows import the type only. The step activities of promotion and demotion record
 * their own progress when given a journal (activities/step-journal.ts).
 */
export const createActivities = (deps: ActivityDeps) => {
  const store = createFleetStoreActivities(deps);
  const host = createSupervisorActivities(deps);
  const journal = <I extends object, R>(describe: (r: R) => string, run: (input: I) => Promise<R>) =>
    withJournal(store.recordStep, describe, run);
  return {
    ...store,
    ...host,
    commitRouting: journal(stepMessages.commitRouting, store.commitRouting),
    stopTraining: journal(stepMessages.stopTraining, host.stopTraining),
    verifyGpuReleased: journal(stepMessages.verifyGpuReleased, host.verifyGpuReleased),
    wakeModels: journal(stepMessages.wakeModels, host.wakeModels),
    probeModels: journal(stepMessages.probeModels, host.probeModels),
    sleepModels: journal(stepMessages.sleepModels, host.sleepModels),
    startTraining: journal(stepMessages.startTraining, host.startTraining),
    drainDomain: journal(stepMessages.drainDomain, host.drainDomain),
    ...createHostRepairActivities(deps),
    ...createFleetMonitorActivities(deps),
    ...createProvisioningActivities(deps),
  };
};

export type Activities = ReturnType<typeof createActivities>;
