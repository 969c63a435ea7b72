import { pgEnum } from 'drizzle-orm/pg-core';
import {
  DOMAIN_STATES,
  OPERATION_KINDS,
  OPERATION_STATES,
  PROVIDERS,
  SLOT_KINDS,
  SLOT_STATES,
  type SlotState,
} from '../../schemas/enums';
import { TRAINING_JOB_STATES } from '../../schemas/training-job';

/** Postgres enums, built from the tuples in schemas/enums.ts so the database and the types cannot drift. */
export const providerEnum = pgEnum('provider', PROVIDERS);
export const domainStateEnum = pgEnum('domain_state', DOMAIN_STATES);
export const slotKindEnum = pgEnum('slot_kind', SLOT_KINDS);
/** Inference and training states share one column; a CHECK on `slots` ties each state to its kind. */
export const slotStateEnum = pgEnum('slot_state', SLOT_STATES as [SlotState, ...SlotState[]]);
export const operationKindEnum = pgEnum('operation_kind', OPERATION_KINDS);
export const operationStateEnum = pgEnum('operation_state', OPERATION_STATES);
export const trainingJobStateEnum = pgEnum('training_job_state', TRAINING_JOB_STATES);
