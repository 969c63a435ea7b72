import type { HaruDatabase } from './client';
import { createDomainRepo } from './repo/domains';
import { createEventRepo } from './repo/events';
import { createFleetRepo } from './repo/fleets';
import { createOperationRepo } from './repo/operations';
import { createSlotRepo } from './repo/slots';
import { createTrainingJobRepo } from './repo/training-jobs';
import { createWatchWorkerRepo } from './repo/watch-workers';

export type { CommitRoutingInput, CommitRoutingResult } from './repo/routing';
export type { CreateOperationInput, CreateOperationResult } from './repo/operations';
export type { AppendEventInput } from './repo/events';
export type { PollResult } from './repo/domains';
export type {
  SubmitTrainingJobInput,
  SubmitTrainingJobResult,
  TrainingJobTransitionResult,
} from './repo/training-jobs';

/** The state store: one repository per aggregate over one database. */
export interface Store {
  fleets: ReturnType<typeof createFleetRepo>;
  domains: ReturnType<typeof createDomainRepo>;
  slots: ReturnType<typeof createSlotRepo>;
  operations: ReturnType<typeof createOperationRepo>;
  events: ReturnType<typeof createEventRepo>;
  watchWorkers: ReturnType<typeof createWatchWorkerRepo>;
  trainingJobs: ReturnType<typeof createTrainingJobRepo>;
}

/**
 * Builds the store over an open database. `now` stamps every row the store writes (inject a fake clock
 * in tests). Every state change is one guarded statement; nothing here holds a transaction across I/O.
 */
export function createStore(database: HaruDatabase, now: () => Date = () => new Date()): Store {
  const deps = { db: database.db, now };
  const store: Store = {
    fleets: createFleetRepo(deps),
    domains: createDomainRepo(deps),
    slots: createSlotRepo(deps),
    operations: createOperationRepo(deps),
    events: createEventRepo(deps),
    watchWorkers: createWatchWorkerRepo(deps),
    trainingJobs: createTrainingJobRepo(deps),
  };
  databases.set(store, { database, now });
  return store;
}

const databases = new WeakMap<Store, { database: HaruDatabase; now: () => Date }>();

/** The database and clock a store was built over, or null for a store not made by createStore (a fake). */
export function storeInternals(store: Store): { database: HaruDatabase; now: () => Date } | null {
  return databases.get(store) ?? null;
}
