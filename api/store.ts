import type { OperationKind } from '../schemas/enums';
import type { Fleet, FleetSnapshot, HaruEvent, Operation } from '../schemas/entities';
import type { InputProblem } from '../schemas/issues';
import type {
  TrainingJob,
  TrainingJobEvent,
  TrainingJobHistoryEntry,
  TrainingJobRefusalCode,
  TrainingJobState,
} from '../schemas/training-job';

/**
 * The slice of the state store (db/store.ts `createStore`) the API uses. Declared here so the API
 * depends on the contract, not on the repository implementation; the real Store satisfies it.
 */
export interface ApiStore {
  fleets: {
    list(): Promise<FleetSnapshot[]>;
    /** By slug or UUID; null when no such fleet. */
    snapshot(ref: string): Promise<FleetSnapshot | null>;
    /** The fleet's current route revision; null when no such fleet. */
    routeRevision(fleetId: string): Promise<number | null>;
    /** Pauses or resumes automatic failover, recording who and why; null when no such fleet. */
    setAutoFailoverPause(
      fleetId: string,
      change: { paused: boolean; by: string; reason?: string | null },
    ): Promise<{ fleet: Fleet; changed: boolean } | null>;
  };
  operations: {
    create(input: {
      fleetId: string;
      kind: OperationKind;
      targetDomainId: string;
      reason: string;
      requestedBy: string;
    }): Promise<{ outcome: 'created' | 'joined' | 'conflict'; operation: Operation }>;
    get(id: string): Promise<Operation | null>;
    list(fleetId: string, opts?: { limit?: number }): Promise<Operation[]>;
    cancel(id: string, error: { step: string; code: string; message: string }): Promise<Operation | null>;
    /** Used by `fleet repair` to end an orphaned operation (db/orphaned-operation.ts). */
    succeed(id: string): Promise<Operation | null>;
    fail(id: string, error: { step: string; code: string; message: string }): Promise<Operation | null>;
  };
  /** Absent in a store that cannot announce (then the monitor hears of no served answers). */
  domains?: {
    /** NOTIFY SERVED_ANSWER_CHANNEL: the domain answered a user successfully at `at`. */
    announceServedAnswer(domainId: string, at: Date): Promise<void>;
    announceMissedAnswer(domainId: string, at: Date, why: string): Promise<void>;
  };
  /** Training jobs (db/repo/training-jobs.ts, docs/architecture.md §3.6). */
  trainingJobs: {
    /** Checks the spec against the fleet's templates and queues it; `invalid` writes nothing. */
    submit(input: {
      fleetId: string;
      spec: unknown;
      requestedBy: string;
    }): Promise<{ outcome: 'submitted'; job: TrainingJob } | { outcome: 'invalid'; problems: InputProblem[] }>;
    /** Null when no such job. */
    get(jobId: string): Promise<TrainingJob | null>;
    /** Oldest first; `after` is the last job of the previous page. */
    list(
      fleetId: string,
      opts?: { states?: readonly TrainingJobState[]; limit?: number; after?: Pick<TrainingJob, 'id' | 'createdAt'> },
    ): Promise<TrainingJob[]>;
    history(jobId: string, opts?: { after?: number; limit?: number }): Promise<TrainingJobHistoryEntry[]>;
    /** Decided by the state machine (core/training-job.ts); a refusal changes nothing. */
    transition(
      jobId: string,
      event: TrainingJobEvent,
    ): Promise<
      | { outcome: 'applied'; job: TrainingJob; entry: TrainingJobHistoryEntry }
      | { outcome: 'refused'; code: TrainingJobRefusalCode; reason: string; job: TrainingJob }
    >;
  };
  events: {
    append(input: {
      fleetId: string;
      operationId?: string | null;
      domainId?: string | null;
      type: string;
      message: string;
      data?: Record<string, unknown>;
    }): Promise<HaruEvent>;
    list(fleetId: string, opts?: { after?: number; limit?: number; order?: 'asc' | 'desc' }): Promise<HaruEvent[]>;
  };
}

/** The database handle's parts the API uses (db/client.ts `HaruDatabase`). */
export interface ApiDatabase {
  /** Subscribes to a NOTIFY channel; resolves with an unsubscribe function. */
  listen(channel: string, onPayload: (payload: string) => void): Promise<() => Promise<void>>;
  /** Throws when the database cannot be reached. */
  ping(): Promise<void>;
}
