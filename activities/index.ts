import type { ActivityDeps } from './deps';
import { createFleetMonitorActivities } from './fleet-monitor';
import { createFleetStoreActivities } from './fleet-store';
import { createProvisioningActivities } from './provisioning';
import { createSupervisorActivities } from './supervisor';

/**
 * Every activity the worker registers, keyed by the name stored in workflow history (renaming one is a
 * breaking change). Workflows import the type only.
 */
export const createActivities = (deps: ActivityDeps) => ({
  ...createFleetStoreActivities(deps),
  ...createSupervisorActivities(deps),
  ...createFleetMonitorActivities(deps),
  ...createProvisioningActivities(deps),
});

export type Activities = ReturnType<typeof createActivities>;
