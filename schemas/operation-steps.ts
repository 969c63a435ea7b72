/**
 * The operations' step names, without zod: workflow code imports them, and every module a workflow imports is
 * evaluated again for each new workflow execution (the SDK's reusable V8 context keeps no module state between
 * executions), so a zod import here would build every schema at the start of each promotion.
 */

/** The promotion's steps, in order. Names are stored in operation rows and workflow progress. */
export const PROMOTION_STEPS = [
  'stopTraining',
  'verifyGpuReleased',
  'wakeModels',
  'probeModels',
  'commitRouting',
  'demoteOldActive',
] as const;
export const DEMOTION_STEPS = ['drain', 'sleepModels', 'startTraining'] as const;
export const OPERATION_STEPS = [...PROMOTION_STEPS, ...DEMOTION_STEPS, 'compensate'] as const;
