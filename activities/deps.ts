import type { fetch as undiciFetch } from 'undici';
import type { DomainState } from '../schemas/enums';
import type { DomainRole } from '../core/domain-role';
import type { SupervisorStatus } from '../schemas/supervisor';
import type { Store } from '../db/store';
import type { SkyCli } from '../drivers/sky';
import type { SupervisorCertificateIssuer } from './provisioning-certificate';
import type { SupervisorAccessResolver } from '../clients/supervisor-access';
import type { ServedAnswers } from './served-answers';
import type { SupervisorClient } from './supervisor-client';
import type { UpstreamCredentials } from '../lib/secret-ref';
import type { FleetObservation } from '../core/fleet-observation';
import type { WatchPeers } from './watch-peers';

/**
 * A domain as one recorded poll left it: its state, when the watcher last heard it (the worker's receive time of
 * the last answer that counted as a sighting; null when never), how long a sighting stays current (the fleet's
 * `heartbeatStaleMs`), and what its host answered at this poll (null when it did not answer with a status).
 */
export interface HostObservation {
  state: DomainState;
  /** What the domain is to its fleet after the poll (`domainRole`): only a standby's training GPUs are harvest. */
  role: DomainRole;
  lastSeenAt: string | null;
  staleAfterMs: number;
  status: SupervisorStatus | null;
  /** When `status` came (this worker's clock); null with it. */
  answeredAt: string | null;
}

/** Counters the activities bump; the worker backs them with prom-client, tests leave them out. */
export interface ActivityMetrics {
  /** One supervisor poll by the fleet monitor. */
  domainPolled(labels: { fleet: string; domain: string; outcome: 'ok' | 'error' }): void;
  /** A routing pointer move (or a lost CAS). */
  routingCommit(labels: { fleet: string; outcome: 'committed' | 'already_committed' | 'conflict' }): void;
  /** An operation ended (`fleet` the slug), after `seconds` from its start. */
  operationFinished(labels: { fleet: string; kind: string; outcome: string }, seconds: number): void;
  /** A step activity succeeded, `seconds` after its first attempt was scheduled. */
  stepSucceeded(labels: { fleet: string; step: string }, seconds: number): void;
  /** Each recorded poll of a domain: its sighting and state after the poll, and what its host answered. */
  hostObserved(labels: { fleet: string; domain: string }, observed: HostObservation): void;
  /** How many watch shards this worker holds now. */
  watchShardsHeld?(held: number): void;
  /** Whether this worker's last round of a fleet saw none of its domains (core/poll-record.ts `isBlindRound`). */
  watcherBlind?(labels: { fleet: string }, isBlind: boolean): void;
}

/** Everything activities touch, injected by the worker (or by a test). */
export interface ActivityDeps {
  store: Store;
  supervisor: SupervisorClient;
  /** Wall clock for rows, deadlines and heartbeats. */
  now: () => Date;
  /** Pause between two status reads while an activity waits for an effect (default 250 ms). */
  pollIntervalMs?: number;
  /** Pause between two `sky` status reads while a teardown waits for its cluster or service to go (default 5 s). */
  skyPollIntervalMs?: number;
  /** How long after a `sky down` / `stop` / `serve down` its target may still be listed (default 4 min). */
  teardownCheckWithinMs?: number;
  /** How long a started training run must stay alive before it counts as started (default 1 s). */
  trainingSettleMs?: number;
  metrics?: ActivityMetrics;
  /** The `sky` CLI for skypilot/skyserve domains; provisioning activities fail non-retryably without it. */
  sky?: SkyCli;
  /**
   * How the supervisor client reaches each domain (the same resolver): provisioning hands a domain's token to
   * the host it launches (`sky launch --secret HARU_SUPERVISOR_TOKEN`) and waits for its `/healthz` over the
   * domain's connection (its CA and TLS server name).
   */
  supervisorAccess?: Pick<SupervisorAccessResolver, 'tokenFor' | 'connect'>;
  /** Issues the certificates of `supervisor.issueCertificate` domains (HARU_SUPERVISOR_CA_KEY_FILE). */
  supervisorCertificates?: SupervisorCertificateIssuer;
  /** The proxies' announced served answers (default: heard over the store's database). */
  servedAnswers?: ServedAnswers;
  /** HTTP for the supervisor's open `/healthz` and the probe through servingUrl (default: undici's fetch; `/healthz` goes through the domain's connection). */
  fetch?: typeof undiciFetch;
  /** The tokens layouts' `upstreamAuth` name (default: this process's environment and files). */
  upstreamCredentials?: UpstreamCredentials;
  /**
   * How many watch shards this worker deals the fleets over (HARU_MONITOR_SHARDS, default
   * DEFAULT_WATCH_SHARDS): a shard's watch started for another count ends at once (core/watch-shard.ts).
   */
  watchShards?: number;
  /** Signals a fleet's monitor an observation (Temporal's `observed` signal); watch shards fail without it. */
  observeFleet?: (fleetId: string, observation: FleetObservation) => Promise<void>;
  /**
   * The other workers holding watch shards (activities/watch-peers.ts): with them, a worker holding more than
   * its share hands shards on; without, it keeps every shard it is given.
   */
  watchPeers?: WatchPeers;
}

export const DEFAULT_POLL_INTERVAL_MS = 250;
export const DEFAULT_SKY_POLL_INTERVAL_MS = 5_000;
/**
 * SkyServe terminates a service's replicas after its `sky serve down` returns: the time they get. Within the
 * destroy step's 15 min with a 10 min command.
 */
export const DEFAULT_TEARDOWN_CHECK_WITHIN_MS = 4 * 60_000;
export const DEFAULT_TRAINING_SETTLE_MS = 1_000;
