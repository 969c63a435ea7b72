/** The worker's workflowsPath: workflow functions only (everything exported here is registered). */
export { promotionWorkflow } from './promotion';
export { demotionWorkflow } from './demotion';
export { fleetMonitorWorkflow } from './fleet-monitor';
export { provisionDomainWorkflow } from './provision';
export { teardownDomainWorkflow } from './teardown';
export { watchShardWorkflow } from './watch-shard';
export { workerWarmUpWorkflow } from './warm-up';
