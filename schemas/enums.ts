import { z } from 'zod';
import { OPERATION_STEPS } from './operation-steps';

/** How a domain's machines come to exist: by hand (`static`), a SkyPilot cluster, or a SkyServe service. */
export const PROVIDERS = ['static', 'skypilot', 'skyserve'] as const;
export const providerSchema = z.enum(PROVIDERS);
export type Provider = z.infer<typeof providerSchema>;

export const SLOT_KINDS = ['inference', 'training'] as const;
export const slotKindSchema = z.enum(SLOT_KINDS);
export type SlotKind = z.infer<typeof slotKindSchema>;

/** vLLM sleep levels: 1 keeps weights in CPU RAM (fast wake), 2 discards them (reload on wake). */
export const sleepLevelSchema = z.union([z.literal(1), z.literal(2)]);
export type SleepLevel = z.infer<typeof sleepLevelSchema>;

export const OPERATION_KINDS = ['promote', 'demote'] as const;
export const operationKindSchema = z.enum(OPERATION_KINDS);
export type OperationKind = z.infer<typeof operationKindSchema>;

export const DOMAIN_STATES = ['provisioning', 'ready', 'degraded', 'failed', 'stopping', 'stopped'] as const;
export const domainStateSchema = z.enum(DOMAIN_STATES);
export type DomainState = z.infer<typeof domainStateSchema>;

export const INFERENCE_SLOT_STATES = [
  'starting',
  'serving',
  'sleeping',
  'waking',
  'probing',
  'failed',
  'stopped',
] as const;
export const inferenceSlotStateSchema = z.enum(INFERENCE_SLOT_STATES);
export type InferenceSlotState = z.infer<typeof inferenceSlotStateSchema>;

export const TRAINING_SLOT_STATES = ['idle', 'training', 'stopping', 'failed', 'stopped'] as const;
export const trainingSlotStateSchema = z.enum(TRAINING_SLOT_STATES);
export type TrainingSlotState = z.infer<typeof trainingSlotStateSchema>;

export const SLOT_STATES = [...new Set([...INFERENCE_SLOT_STATES, ...TRAINING_SLOT_STATES])] as (
  InferenceSlotState | TrainingSlotState
)[];
export type SlotState = InferenceSlotState | TrainingSlotState;

export const OPERATION_STATES = ['pending', 'running', 'succeeded', 'failed', 'cancelled'] as const;
export const operationStateSchema = z.enum(OPERATION_STATES);
export type OperationState = z.infer<typeof operationStateSchema>;
/** Operations in these states hold the fleet's single in-flight slot (partial unique index). */
export const IN_FLIGHT_OPERATION_STATES = ['pending', 'running'] as const satisfies readonly OperationState[];

export const operationStepSchema = z.enum(OPERATION_STEPS);
export type OperationStep = z.infer<typeof operationStepSchema>;

/** What a promotion does when a woken model scores its stored answer outside the tolerance (policy `probe.fingerprint.mode`). */
export const FINGERPRINT_MODES = ['enforce', 'warn'] as const;
export const fingerprintModeSchema = z.enum(FINGERPRINT_MODES);
export type FingerprintMode = z.infer<typeof fingerprintModeSchema>;
