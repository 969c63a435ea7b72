/**
 * Workflow ids are business keys derived from what a workflow is about, never from time or chance: a second
 * start of the same thing lands on the same id, so Temporal refuses or joins it. Every id is written here
 * once; the state store derives the operation row's `workflowId` with the same function.
 */

/** The fleet's monitor: one per fleet, for as long as the fleet exists. */
export const monitorWorkflowId = (fleetId: string): string => `haru/${fleetId}/monitor`;

/** A promote or demote operation's workflow, derived from the operation row. */
export const operationWorkflowId = (fleetId: string, operationId: string): string =>
  `haru/${fleetId}/op/${operationId}`;

/** The demotion a promotion starts for the old active: a child of the operation, not an operation itself. */
export const demotionChildWorkflowId = (fleetId: string, operationId: string): string =>
  `${operationWorkflowId(fleetId, operationId)}/demote`;

/** The provisioning of a skypilot/skyserve domain: one at a time per domain. */
export const provisionWorkflowId = (domainId: string): string => `haru/${domainId}/provision`;

/** The teardown of a skypilot/skyserve domain. */
export const teardownWorkflowId = (domainId: string): string => `haru/${domainId}/teardown`;
