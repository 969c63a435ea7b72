import { z } from 'zod';

/** `POST /v1/fleets/:fleet/domains/:domain/provision`: the body is optional. */
export const provisionRequestSchema = z.strictObject({
  reason: z.string().min(1).max(500).optional(),
});
export type ProvisionRequest = z.infer<typeof provisionRequestSchema>;

/** How a teardown leaves the machines: `down` terminates them, `stop` keeps their disks (skypilot only). */
export const TEARDOWN_MODES = ['down', 'stop'] as const;
export const teardownModeSchema = z.enum(TEARDOWN_MODES);
export type TeardownMode = z.infer<typeof teardownModeSchema>;

/** `POST /v1/fleets/:fleet/domains/:domain/teardown`: the body is optional. */
export const teardownRequestSchema = z.strictObject({
  mode: teardownModeSchema.default('down'),
  reason: z.string().min(1).max(500).optional(),
});
export type TeardownRequest = z.infer<typeof teardownRequestSchema>;

/**
 * 202 of provision/teardown: the workflow was started (`accepted`) or one with the same id was already
 * running (`already_running`, the same workflow id: asking twice is harmless).
 */
export const provisioningAcceptedResponseSchema = z.object({
  status: z.enum(['accepted', 'already_running']),
  kind: z.enum(['provision', 'teardown']),
  domainId: z.uuid(),
  workflowId: z.string(),
});
export type ProvisioningAcceptedResponse = z.infer<typeof provisioningAcceptedResponseSchema>;

/** 200 of a teardown of a domain that is already stopped: nothing was started. */
export const teardownAlreadyStoppedResponseSchema = z.object({
  status: z.literal('already_stopped'),
  kind: z.literal('teardown'),
  domainId: z.uuid(),
  workflowId: z.null(),
});
