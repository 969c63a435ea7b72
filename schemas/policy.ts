import { z } from 'zod';
import { FINGERPRINT_MODES } from './enums';

const ms = (defaultMs: number) => z.number().int().positive().default(defaultMs);

/** `replaceFailedStandby` of a fleet policy; see {@link fleetPolicySchema}. */
export const replaceFailedStandbySchema = z.strictObject({
  enabled: z.boolean().default(false),
  /** How long the monitor must have seen the standby failed before replacing it (default 5 min). */
  graceMs: ms(300_000),
});
export type ReplaceFailedStandbyPolicy = z.infer<typeof replaceFailedStandbySchema>;

/**
 * A fleet's failover policy. Every field is optional with a default; unknown keys are rejected so a
 * typo (`autoFailOver`) is an error, not a silently ignored setting. Durations are milliseconds.
 */
export const fleetPolicySchema = z
  .strictObject({
    /** Promote a standby without a human when the active fails. */
    autoFailover: z.boolean().default(true),
    /** How often the monitor polls every domain's supervisor. */
    heartbeatIntervalMs: ms(500),
    /** A domain whose last successful poll is older than this is stale (treated as failed). */
    heartbeatStaleMs: ms(5_000),
    /** Consecutive failed polls after which a domain is failed. */
    failureThreshold: z.number().int().min(1).max(100).default(3),
    /** How long an active may stay degraded before failing over to a viable standby. */
    degradedGraceMs: ms(30_000),
    /**
     * How long a failed active must answer healthy, poll after poll, before it is `ready` again (it came
     * back while routing still points at it: without this it would be failed over later for no reason).
     */
    failedActiveRecoveryMs: ms(30_000),
    /** SIGTERM-to-SIGKILL grace given to trainers when a standby is promoted. */
    trainingStopGraceMs: ms(10_000),
    stopTrainingTimeoutMs: ms(60_000),
    verifyGpuTimeoutMs: ms(30_000),
    /**
     * Highest fraction of a training GPU's memory that processes other than its own vLLM servers may still hold
     * before waking them (the servers' own residue while asleep does not count; that the wake fits is checked
     * apart, against what the servers need).
     */
    maxUsedRatioForWake: z.number().min(0).max(1).default(0.1),
    wakeTimeoutMs: ms(120_000),
    probeTimeoutMs: ms(30_000),
    probe: z
      .strictObject({
        prompt: z.string().min(1).max(2_000).default('Reply with the single word: ready'),
        maxTokens: z.number().int().min(1).max(256).default(8),
        /**
         * The wake-fidelity check: each model's answer to a fixed prompt, stored when its domain was demoted, is
         * scored again after the wake. `enforce` fails the probe when the mean token logprob moved by more than
         * `toleranceNats`; `warn` reports it. A model without a stored fingerprint gets the non-blank check only.
         */
        fingerprint: z
          .strictObject({
            mode: z.enum(FINGERPRINT_MODES).default('enforce'),
            toleranceNats: z.number().positive().max(50).default(0.5),
            maxTokens: z.number().int().min(1).max(64).default(16),
          })
          .prefault({}),
      })
      .prefault({}),
    commitTimeoutMs: ms(10_000),
    /**
     * How long a promotion whose commit found the state store unreachable (its woken, probed target waiting)
     * may go on committing: from the commit's first attempt to the store answering again. Within it the target
     * is probed again and the commit made again; past it the promotion compensates and the monitor decides
     * afresh. A lost CAS is never tried again.
     */
    commitOutageBudgetMs: ms(300_000),
    drainTimeoutMs: ms(30_000),
    sleepTimeoutMs: ms(60_000),
    startTrainingTimeoutMs: ms(30_000),
    /**
     * How long one write of an operation's own records (a step, its outcome, an event) is retried against
     * the state store before the workflow pauses and tries it again. An outage of any length delays an
     * operation; it never skips its compensation or leaves it running.
     */
    bookkeepingBudgetMs: ms(60_000),
    /**
     * Replace a standby that stays failed: when a standby domain whose provider is skypilot or skyserve
     * has been failed for `graceMs` as the fleet monitor saw it, the monitor tears it down and provisions
     * it again. Off by default. Never the active domain; one replacement at a time per domain.
     */
    replaceFailedStandby: replaceFailedStandbySchema.prefault({}),
  })
  .refine((p) => p.heartbeatStaleMs > p.heartbeatIntervalMs, {
    message: 'heartbeatStaleMs must be greater than heartbeatIntervalMs',
    path: ['heartbeatStaleMs'],
  })
  .refine((p) => p.stopTrainingTimeoutMs > p.trainingStopGraceMs, {
    message: 'stopTrainingTimeoutMs must be greater than trainingStopGraceMs (the SIGKILL comes after the grace)',
    path: ['stopTrainingTimeoutMs'],
  });

/** A policy with every default filled in. */
export type FleetPolicy = z.infer<typeof fleetPolicySchema>;
/** A policy as written in a layout file or request: every field optional. */
export type FleetPolicyInput = z.input<typeof fleetPolicySchema>;

/** The default policy, for tests and documentation. */
export const defaultFleetPolicy = (): FleetPolicy => fleetPolicySchema.parse({});
